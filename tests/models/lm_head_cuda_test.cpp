// The fused LM head (models/lm_head.h) on CUDA: any chunking of the rows against the float64 computation over
// every logit (fp32 and bf16), and every language family (tied and untied, full fine-tuning and LoRA, packed
// rows, ignored targets) in bf16 and fp32 giving the loss and trained gradients of one chunk of all rows.
// Label `gpu`: skipped, saying so, without a CUDA device.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/knobs.h"
#include "lm_head_cases.h"

namespace llmt::models {
namespace {

using namespace head_cases;

bool no_gpu() { return kernels::device_count(Device::kCuda) == 0; }

TEST(LmHeadCuda, AnyChunkingMatchesThePlainComputation) {
    if (no_gpu()) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    const Problem p = problem(5, 64);  // C a multiple of 8 for cuBLASLt's bf16 path
    for (DType dt : {DType::kF32, DType::kBF16}) {
        const Problem q = dt == DType::kBF16 ? rounded_to_bf16(p) : p;
        const Reference ref = reference(q);
        // fp32: cuBLASLt's fp32 GEMMs (no TF32 by default) and the float softmax, ~1e-6. bf16: the logits and
        // dlogits are stored in bf16 (relative rounding 2^-9) and dx is written in bf16, so ~4e-3 per element
        // and below that in the norm; 1e-2 still fails any wrong row, column or scale.
        const double tol = dt == DType::kF32 ? 1e-5 : 1e-2;
        for (int64_t rows : {int64_t{1}, int64_t{5}, int64_t{16}, q.BT})
            for (bool train : {true, false}) {
                const HeadOut out = run_head_problem(q, Device::kCuda, dt, rows, train);
                const double el = rel_l2(out.losses, ref.losses);
                std::printf("[lm-head-cuda] %s rows %lld train %d: loss %.2e", std::string(dtype_name(dt)).c_str(),
                            static_cast<long long>(rows), train ? 1 : 0, el);
                EXPECT_LT(el, tol) << rows << " rows";
                if (train) {
                    const double ex = rel_l2(out.dx, ref.dx), ew = rel_l2(out.dw, ref.dw);
                    std::printf(" dx %.2e dW %.2e", ex, ew);
                    EXPECT_LT(ex, tol) << rows << " rows";
                    EXPECT_LT(ew, tol) << rows << " rows";
                }
                std::printf("\n");
            }
    }
}

class LmHeadCudaFamilies : public ::testing::TestWithParam<HeadCase> {};

TEST_P(LmHeadCudaFamilies, ChunkedEqualsOneChunkOfAllRows) {
    if (no_gpu()) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    const HeadCase& c = GetParam();
    const CaseShape sh{256, 512, 256};  // head size 64: the cuDNN / flash attention paths
    for (DType dt : {DType::kF32, DType::kBF16}) {
        const HeadRun whole = run_head_case(c, Device::kCuda, dt, "all", sh);
        const HeadRun chunked = run_head_case(c, Device::kCuda, dt, "16", sh);
        ASSERT_EQ(whole.grads.size(), chunked.grads.size());
        // Both runs compute each row's logits and dx with the same kernels; what differs is the GEMMs' row
        // count (cuBLASLt may pick another algorithm, another fp32 summation order), dW's sum over three
        // chunks and, between any two runs, the attention backward's atomic accumulation order. In fp32 that
        // is rounding, ~1e-6 after two layers' backward (1e-4 allowed). In bf16 a rounding difference in a
        // logit can flip its bf16 rounding, one ulp (2^-8 relative) on a few elements, and it propagates
        // through the backward of two layers: 1e-2 relative in the norm. Both far below what a chunk's
        // missing or doubled rows would give (~1).
        const double tol = dt == DType::kF32 ? 1e-4 : 1e-2;
        const double el = std::fabs(chunked.loss - whole.loss) / std::fabs(whole.loss);
        double worst = 0;
        std::string worst_name;
        for (size_t i = 0; i < whole.grads.size(); ++i) {
            const double e = rel_l2(chunked.grads[i], whole.grads[i]);
            double norm = 0;
            for (float g : whole.grads[i]) norm += static_cast<double>(g) * g;
            EXPECT_GT(norm, 0.0) << c.name() << " " << whole.names[i];
            EXPECT_LT(e, tol) << c.name() << " " << dtype_name(dt) << " " << whole.names[i];
            if (e > worst) {
                worst = e;
                worst_name = whole.names[i];
            }
        }
        std::printf("[lm-head-cuda] %s %s: loss %.6f vs %.6f (rel %.2e), worst gradient rel %.2e (%s) of %zu\n",
                    c.name().c_str(), std::string(dtype_name(dt)).c_str(), chunked.loss, whole.loss, el, worst,
                    worst_name.c_str(), whole.grads.size());
        EXPECT_LT(el, dt == DType::kF32 ? 1e-5 : 1e-3) << c.name();
    }
}

INSTANTIATE_TEST_SUITE_P(Registry, LmHeadCudaFamilies, ::testing::ValuesIn(all_head_cases()), test_name);

}  // namespace
}  // namespace llmt::models
