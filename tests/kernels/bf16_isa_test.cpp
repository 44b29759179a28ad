// The bf16 GEMM path choice (kernels/cpu/bf16_isa.h): every branch from given facts (AMX where the CPU lacks it
// included), /proc/cpuinfo's flags, and oneDNN's max-ISA control reaching the choice: a child process of this
// binary runs with ONEDNN_MAX_CPU_ISA=AVX512_CORE and must see oneDNN capped and bf16 emulated, on any CPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/simd.h"
#include "support/subprocess.h"

namespace llmt::kernels::cpu {
namespace {

Bf16Facts amx_cpu() {
    Bf16Facts f;
    f.avx512_bf16 = true;
    f.onednn_isa = kOnednnIsaAvx512CoreAmx;
    f.amx_listed = true;
    f.amx_permitted = true;
    return f;
}

TEST(Bf16Isa, AmxWhenListedPermittedAndAllowedByOnednn) {
    const Bf16Selection s = select_bf16_path(amx_cpu());
    EXPECT_EQ(s.path, Bf16Path::kAmx);
    EXPECT_EQ(s.why, "");
}

TEST(Bf16Isa, AmxRefusedByLinuxFallsBackToAvx512Bf16) {
    Bf16Facts f = amx_cpu();
    f.amx_permitted = false;
    f.amx_refusal = "arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) failed: Invalid argument";
    const Bf16Selection s = select_bf16_path(f);
    EXPECT_EQ(s.path, Bf16Path::kAvx512Bf16);
    EXPECT_NE(s.why.find("Linux refused the tiles"), std::string::npos) << s.why;
    EXPECT_NE(s.why.find("Invalid argument"), std::string::npos) << s.why;
}

TEST(Bf16Isa, OnednnCappedBelowAmxTakesAvx512Bf16) {
    Bf16Facts f = amx_cpu();
    f.onednn_isa = kOnednnIsaAvx512CoreBf16;  // ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 on an AMX CPU
    const Bf16Selection s = select_bf16_path(f);
    EXPECT_EQ(s.path, Bf16Path::kAvx512Bf16);
    EXPECT_NE(s.why.find("avx512_core_bf16"), std::string::npos) << s.why;
}

TEST(Bf16Isa, OnednnCappedBelowBf16Emulates) {
    Bf16Facts f = amx_cpu();
    f.onednn_isa = kOnednnIsaAvx512Core;
    const Bf16Selection s = select_bf16_path(f);
    EXPECT_EQ(s.path, Bf16Path::kEmulated);
    EXPECT_NE(s.why.find("only up to avx512_core "), std::string::npos) << s.why;
}

TEST(Bf16Isa, Avx512Bf16WithoutAmx) {
    Bf16Facts f;
    f.avx512_bf16 = true;
    f.onednn_isa = kOnednnIsaAvx512CoreBf16;
    EXPECT_EQ(select_bf16_path(f).path, Bf16Path::kAvx512Bf16);
    EXPECT_EQ(select_bf16_path(f).why, "");
}

TEST(Bf16Isa, EmulatedWithoutBf16InstructionsOrOnednnOrAvx512) {
    Bf16Facts f;
    f.onednn_isa = 0x7;  // an AVX2 CPU
    EXPECT_EQ(select_bf16_path(f).path, Bf16Path::kEmulated);
    EXPECT_NE(select_bf16_path(f).why.find("no AVX512_BF16"), std::string::npos);
    f = amx_cpu();
    f.onednn_error = "oneDNN 2 could not be loaded";
    EXPECT_EQ(select_bf16_path(f).path, Bf16Path::kEmulated);
    EXPECT_EQ(select_bf16_path(f).why, "oneDNN 2 could not be loaded");
    f = amx_cpu();
    f.avx512_allowed = false;  // LLMTRAIN_CPU_ISA=avx2
    EXPECT_EQ(select_bf16_path(f).path, Bf16Path::kEmulated);
}

TEST(Bf16Isa, CpuinfoFlags) {
    EXPECT_TRUE(cpuinfo_lists_amx("processor\t: 0\nflags\t\t: fpu avx512f amx_bf16 amx_tile amx_int8\n"));
    EXPECT_FALSE(cpuinfo_lists_amx("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16 amx_tile\n"));
    EXPECT_FALSE(cpuinfo_lists_amx("processor\t: 0\nflags\t\t: fpu amx_bf16_x amx_tile\n"));
    // Only the first processor's flags line counts; "flags" inside another field's name does not.
    EXPECT_FALSE(cpuinfo_lists_amx("vmx flags\t: amx_bf16 amx_tile\nflags\t: fpu\nflags\t: amx_bf16 amx_tile\n"));
    EXPECT_FALSE(cpuinfo_lists_amx(""));
}

// This process's path is the choice from its own facts; under ONEDNN_MAX_CPU_ISA=AVX512_CORE (set by the next
// test for a child of this binary) oneDNN must report the cap and bf16 must be emulated, with the reason.
TEST(Bf16Isa, ThisProcessFollowsItsFacts) {
    Bf16Facts f = bf16_facts();
    f.avx512_allowed = simd::isa() == simd::Isa::kAvx512;
    EXPECT_EQ(bf16_selection().path, select_bf16_path(f).path);
    EXPECT_EQ(gemm_bf16_native(), bf16_selection().path != Bf16Path::kEmulated);
    const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
    if (!cap || std::string(cap) != "AVX512_CORE") return;
    ASSERT_EQ(f.onednn_error, "");
    EXPECT_EQ(f.onednn_isa & ~kOnednnIsaAvx512Core, 0) << onednn_isa_name(f.onednn_isa);
    EXPECT_EQ(bf16_selection().path, Bf16Path::kEmulated);
    EXPECT_FALSE(gemm_bf16_native());
    std::printf("capped: %s\n", gemm_bf16_describe().c_str());
}

TEST(Bf16Isa, OnednnMaxIsaControlReachesTheChoice) {
    if (!bf16_facts().onednn_error.empty()) GTEST_SKIP() << "oneDNN unavailable: " << bf16_facts().onednn_error;
    const auto r = llmt::testing::run_process(
        {"/proc/self/exe", "--gtest_filter=Bf16Isa.ThisProcessFollowsItsFacts"}, "", 120,
        {"ONEDNN_MAX_CPU_ISA=AVX512_CORE"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("capped: emulated"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[  PASSED  ] 1 test"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace llmt::kernels::cpu
