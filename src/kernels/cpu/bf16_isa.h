// Which instructions the CPU's bf16 GEMMs run on: Intel AMX tiles (oneDNN's avx512_core_amx kernels),
// AVX512_BF16 (vdpbf16ps, oneDNN's avx512_core_bf16 kernels), or an fp32 emulation (gemm_bf16.h). AMX is
// taken only when the kernel lists amx_bf16 and amx_tile in /proc/cpuinfo, Linux grants this process the
// tile data state (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), which Linux 5.16+ requires before
// the first tile instruction) and oneDNN may dispatch to avx512_core_amx (its max-ISA control,
// ONEDNN_MAX_CPU_ISA / dnnl_set_max_cpu_isa, can lower that). The choice itself is a pure function of
// those facts (select_bf16_path), so tests cover every branch on any CPU.
// Thread safety: all functions are thread-safe; bf16_selection() is computed once per process.
#pragma once

#include <string>
#include <string_view>

namespace llmt::kernels::cpu {

enum class Bf16Path { kAmx, kAvx512Bf16, kEmulated };
const char* bf16_path_name(Bf16Path p);  // "amx" | "avx512_bf16" | "emulated"

// oneDNN's ISA levels (dnnl_cpu_isa_t values: each level's bits include the levels below it).
inline constexpr int kOnednnIsaAvx512Core = 0x27;
inline constexpr int kOnednnIsaAvx512CoreBf16 = 0xe7;
inline constexpr int kOnednnIsaAvx512CoreAmx = 0x3e7;
// "avx512_core_bf16" for 0xe7 and so on; "0x<hex>" for a value without a name.
std::string onednn_isa_name(int isa);

// What the choice depends on.
struct Bf16Facts {
    bool avx512_bf16 = false;    // cpuid: AVX512_BF16 with the zmm state enabled
    bool avx512_allowed = true;  // LLMTRAIN_CPU_ISA allows our avx512 kernels (the operand rounding)
    std::string onednn_error;    // why oneDNN cannot be used (not built in, not loadable); empty when it can
    int onednn_isa = 0;          // dnnl_get_effective_cpu_isa(): the highest ISA oneDNN may dispatch to
    bool amx_listed = false;     // amx_bf16 and amx_tile among /proc/cpuinfo's flags
    bool amx_permitted = false;  // arch_prctl granted the tile data state
    std::string amx_refusal;     // why not, when listed but not permitted (the errno text)
};

struct Bf16Selection {
    Bf16Path path = Bf16Path::kEmulated;
    std::string why;  // emulated: why not native; avx512_bf16 on an AMX CPU: why not AMX; else empty
};

// The path for `facts`. Never throws.
Bf16Selection select_bf16_path(const Bf16Facts& facts);

// amx_bf16 and amx_tile both among the flags of the first processor in /proc/cpuinfo's text.
bool cpuinfo_lists_amx(std::string_view cpuinfo);

// This process's facts: reads /proc/cpuinfo, asks Linux for the tile data state when AMX is listed, and
// asks oneDNN for its effective ISA (loading it). When AMX is listed but refused, oneDNN is capped at
// avx512_core_bf16 first, so that it never issues a tile instruction Linux would kill us for.
Bf16Facts probe_bf16_facts();

// probe_bf16_facts(), once per process; avx512_allowed is left true there.
const Bf16Facts& bf16_facts();
// select_bf16_path() of those facts with avx512_allowed as LLMTRAIN_CPU_ISA says now.
const Bf16Selection& bf16_selection();

}  // namespace llmt::kernels::cpu
