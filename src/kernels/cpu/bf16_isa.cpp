// The bf16 GEMM path (bf16_isa.h): facts from /proc/cpuinfo, Linux's arch_prctl and oneDNN; the choice from
// the facts.
#include "kernels/cpu/bf16_isa.h"

#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>

#include "core/cpu_features.h"
#include "kernels/cpu/simd.h"

#if LLMT_HAVE_ONEDNN
#include <dnnl.h>
#endif

namespace llmt::kernels::cpu {
namespace {

// asm/prctl.h's request and the x86 XSAVE feature number of the AMX tile data (Linux's
// Documentation/arch/x86/xstate.rst); spelled out because older kernel headers lack them.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// True when Linux grants this process the tile data state; else `refusal` says why.
bool request_amx_permission(std::string& refusal) {
#if defined(__x86_64__)
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0) return true;
    refusal = fmt::format("arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) failed: {}", std::strerror(errno));
#else
    refusal = "not an x86-64 build";
#endif
    return false;
}

std::string read_cpuinfo() {
    std::ifstream in("/proc/cpuinfo");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

const char* bf16_path_name(Bf16Path p) {
    switch (p) {
        case Bf16Path::kAmx: return "amx";
        case Bf16Path::kAvx512Bf16: return "avx512_bf16";
        case Bf16Path::kEmulated: return "emulated";
    }
    return "?";
}

std::string onednn_isa_name(int isa) {
    switch (isa) {
        case 0x0: return "all";
        case 0x1: return "sse41";
        case 0x3: return "avx";
        case 0x7: return "avx2";
        case kOnednnIsaAvx512Core: return "avx512_core";
        case 0x67: return "avx512_core_vnni";
        case kOnednnIsaAvx512CoreBf16: return "avx512_core_bf16";
        case kOnednnIsaAvx512CoreAmx: return "avx512_core_amx";
        case 0x407: return "avx2_vnni";
        default: return fmt::format("{:#x}", isa);
    }
}

Bf16Selection select_bf16_path(const Bf16Facts& f) {
    auto allows = [&](int level) { return (f.onednn_isa & level) == level; };
    if (!f.avx512_allowed) return {Bf16Path::kEmulated, "LLMTRAIN_CPU_ISA is below avx512"};
    if (!f.onednn_error.empty()) return {Bf16Path::kEmulated, f.onednn_error};
    if (f.amx_listed && f.amx_permitted && allows(kOnednnIsaAvx512CoreAmx)) return {Bf16Path::kAmx, ""};
    if (!f.avx512_bf16) return {Bf16Path::kEmulated, "this CPU has no AVX512_BF16 (vdpbf16ps)"};
    if (!allows(kOnednnIsaAvx512CoreBf16))
        return {Bf16Path::kEmulated,
                fmt::format("oneDNN may dispatch only up to {} (its max-ISA control, ONEDNN_MAX_CPU_ISA), below "
                            "avx512_core_bf16",
                            onednn_isa_name(f.onednn_isa))};
    if (!f.amx_listed) return {Bf16Path::kAvx512Bf16, ""};
    if (!f.amx_permitted)
        return {Bf16Path::kAvx512Bf16, "AMX is listed but Linux refused the tiles: " + f.amx_refusal};
    return {Bf16Path::kAvx512Bf16,
            fmt::format("AMX is listed but oneDNN may dispatch only up to {} (ONEDNN_MAX_CPU_ISA)",
                        onednn_isa_name(f.onednn_isa))};
}

bool cpuinfo_lists_amx(std::string_view text) {
    // The first "flags" line: every processor lists the same on the machines we run on.
    size_t at = 0;
    while (at < text.size()) {
        const size_t end = std::min(text.find('\n', at), text.size());
        const std::string_view line = text.substr(at, end - at);
        if (line.rfind("flags", 0) == 0 && line.find(':') != std::string_view::npos) {
            bool bf16 = false, tile = false;
            std::istringstream words{std::string(line.substr(line.find(':') + 1))};
            for (std::string w; words >> w;) {
                bf16 = bf16 || w == "amx_bf16";
                tile = tile || w == "amx_tile";
            }
            return bf16 && tile;
        }
        at = end + 1;
    }
    return false;
}

Bf16Facts probe_bf16_facts() {
    Bf16Facts f;
    f.avx512_bf16 = cpu_features().avx512_bf16;
    f.amx_listed = cpuinfo_lists_amx(read_cpuinfo());
    if (f.amx_listed) f.amx_permitted = request_amx_permission(f.amx_refusal);
#if LLMT_HAVE_ONEDNN
    try {
        // Before any other oneDNN call: with tiles refused, oneDNN must not choose its AMX kernels.
        if (f.amx_listed && !f.amx_permitted &&
            dnnl_set_max_cpu_isa(static_cast<dnnl_cpu_isa_t>(kOnednnIsaAvx512CoreBf16)) != dnnl_success)
            f.onednn_error = "AMX is listed, Linux refused the tiles, and oneDNN's ISA could no longer be capped";
        f.onednn_isa = static_cast<int>(dnnl_get_effective_cpu_isa());
    } catch (const std::exception& e) {
        f.onednn_error = e.what();
    }
#else
    f.onednn_error = "this build has no oneDNN (libdnnl-dev)";
#endif
    return f;
}

const Bf16Facts& bf16_facts() {
    static const Bf16Facts f = probe_bf16_facts();
    return f;
}

const Bf16Selection& bf16_selection() {
    // LLMTRAIN_CPU_ISA may change within a process (tests' ScopedKnob): one selection per answer.
    static const Bf16Selection allowed = select_bf16_path(bf16_facts()), narrowed = [] {
        Bf16Facts f = bf16_facts();
        f.avx512_allowed = false;
        return select_bf16_path(f);
    }();
    return simd::isa() == simd::Isa::kAvx512 ? allowed : narrowed;
}

}  // namespace llmt::kernels::cpu
