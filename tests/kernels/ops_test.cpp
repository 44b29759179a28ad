// kernels/ops.h: validation (shape, dtype, device, id range) and dispatch; the numerics are covered by
// kernels_test.cpp through the same cpu:: functions ops.cpp calls.
#include "core/build_info.h"
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "test_util.h"

namespace llmt::kernels {
namespace {

TEST(Ops, MatmulValidatesAndRuns) {
    std::vector<float> x(2 * 3 * 4, 1.0f), w(5 * 4, 0.5f), b(5, 1.0f), out(2 * 3 * 5);
    matmul_forward(Tensor(out.data(), {2, 3, 5}), Tensor(x.data(), {2, 3, 4}), Tensor(w.data(), {5, 4}),
                   Tensor(b.data(), {5}));
    for (float v : out) EXPECT_FLOAT_EQ(v, 3.0f);  // 4 * 0.5 + 1
    matmul_forward(Tensor(out.data(), {2, 3, 5}), Tensor(x.data(), {2, 3, 4}), Tensor(w.data(), {5, 4}),
                   Tensor());
    for (float v : out) EXPECT_FLOAT_EQ(v, 2.0f);
    try {
        matmul_forward(Tensor(out.data(), {2, 3, 5}), Tensor(x.data(), {2, 4, 3}), Tensor(w.data(), {5, 4}),
                       Tensor());
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("matmul_forward"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("inp"), std::string::npos) << e.what();
    }
}

TEST(Ops, DtypeAndDevice) {
    std::vector<float> a(8), b(8);
    std::vector<int32_t> ia(8);
    EXPECT_THROW(gelu_forward(Tensor(a.data(), {8}), Tensor(ia.data(), {8}, DType::kI32)), InputError);
    EXPECT_THROW(gelu_forward(Tensor(a.data(), {8}), Tensor(b.data(), {8}, DType::kF32, Device::kCuda)),
                 InputError);  // mixed devices
#if !LLMT_CUDA_ENABLED
    // Without the CUDA backend a CUDA tensor is refused (with it, the op would run on the GPU:
    // tests/kernels/cuda_ops_test.cpp).
    EXPECT_THROW(gelu_forward(Tensor(a.data(), {8}, DType::kF32, Device::kCuda),
                              Tensor(b.data(), {8}, DType::kF32, Device::kCuda)),
                 DeviceError);
#endif
    EXPECT_THROW(gelu_forward(Tensor(a.data(), {8}), Tensor(b.data(), {7})), InputError);
}

TEST(Ops, TokenAndTargetRanges) {
    const int B = 1, T = 2, C = 4, V = 3;
    std::vector<float> out(B * T * C), wte(V * C), wpe(T * C);
    std::vector<int32_t> ids = {0, 3};
    EXPECT_THROW(encoder_forward(Tensor(out.data(), {B, T, C}), Tensor(ids.data(), {B, T}, DType::kI32),
                                 Tensor(wte.data(), {V, C}), Tensor(wpe.data(), {T, C})),
                 InputError);
    ids[1] = 2;
    encoder_forward(Tensor(out.data(), {B, T, C}), Tensor(ids.data(), {B, T}, DType::kI32),
                    Tensor(wte.data(), {V, C}), Tensor(wpe.data(), {T, C}));

    std::vector<float> logits(B * T * 4), losses(B * T);
    std::vector<int32_t> y = {0, 3};  // 3 == V: a padding column is never a valid target
    EXPECT_THROW(classifier_forward(Tensor(losses.data(), {B, T}), Tensor(logits.data(), {B, T, 4}),
                                    Tensor(y.data(), {B, T}, DType::kI32), V),
                 InputError);
    EXPECT_THROW(classifier_forward(Tensor(losses.data(), {B, T}), Tensor(logits.data(), {B, T, 4}),
                                    Tensor(y.data(), {B, T}, DType::kI32), 5),
                 InputError);  // V > Vp
    y[1] = -1;
    classifier_forward(Tensor(losses.data(), {B, T}), Tensor(logits.data(), {B, T, 4}),
                       Tensor(y.data(), {B, T}, DType::kI32), V);
    EXPECT_NEAR(losses[0], std::log(3.0), 1e-6);  // uniform logits over V = 3 classes
    EXPECT_EQ(losses[1], 0.0f);
}

TEST(Ops, AttentionHeadsMustDivide) {
    std::vector<float> out(1 * 2 * 6), lse(1 * 4 * 2), qkv(1 * 2 * 18);
    EXPECT_THROW(attention_forward(Tensor(out.data(), {1, 2, 6}), Tensor(lse.data(), {1, 4, 2}),
                                   Tensor(qkv.data(), {1, 2, 18}), 4),
                 InputError);
}

TEST(Ops, GemmBackendName) {
    const std::string name = gemm_backend_name();
    EXPECT_TRUE(name == "onednn" || name == "openblas") << name;
}

}  // namespace
}  // namespace llmt::kernels
