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
        FAIL() << "expected InternalError";
    } catch (const InternalError& e) {
        EXPECT_NE(std::string(e.what()).find("matmul_forward"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("inp"), std::string::npos) << e.what();
    }
}

TEST(Ops, DtypeAndDevice) {
    std::vector<float> a(8), b(8);
    std::vector<int32_t> ia(8);
    EXPECT_THROW(gelu_forward(Tensor(a.data(), {8}), Tensor(ia.data(), {8}, DType::kI32)), InternalError);
    EXPECT_THROW(gelu_forward(Tensor(a.data(), {8}), Tensor(b.data(), {8}, DType::kF32, Device::kCuda)),
                 InternalError);  // mixed devices
#if !LLMT_CUDA_ENABLED
    // Without the CUDA backend a CUDA tensor is refused (with it, the op would run on the GPU:
    // tests/kernels/cuda_ops_test.cpp).
    EXPECT_THROW(gelu_forward(Tensor(a.data(), {8}, DType::kF32, Device::kCuda),
                              Tensor(b.data(), {8}, DType::kF32, Device::kCuda)),
                 DeviceError);
#endif
    EXPECT_THROW(gelu_forward(Tensor(a.data(), {8}), Tensor(b.data(), {7})), InternalError);
}

TEST(Ops, TokenAndTargetRanges) {
    const int B = 1, T = 2, C = 4, V = 3;
    std::vector<float> out(B * T * C), wte(V * C), wpe(T * C);
    std::vector<int32_t> ids = {0, 3};
    EXPECT_THROW(encoder_forward(Tensor(out.data(), {B, T, C}), Tensor(ids.data(), {B, T}, DType::kI32),
                                 Tensor(wte.data(), {V, C}), Tensor(wpe.data(), {T, C})),
                 InternalError);
    ids[1] = 2;
    encoder_forward(Tensor(out.data(), {B, T, C}), Tensor(ids.data(), {B, T}, DType::kI32),
                    Tensor(wte.data(), {V, C}), Tensor(wpe.data(), {T, C}));

    std::vector<float> logits(B * T * 4), losses(B * T);
    std::vector<int32_t> y = {0, 3};  // 3 == V: a padding column is never a valid target
    EXPECT_THROW(classifier_forward(Tensor(losses.data(), {B, T}), Tensor(logits.data(), {B, T, 4}),
                                    Tensor(y.data(), {B, T}, DType::kI32), V),
                 InternalError);
    EXPECT_THROW(classifier_forward(Tensor(losses.data(), {B, T}), Tensor(logits.data(), {B, T, 4}),
                                    Tensor(y.data(), {B, T}, DType::kI32), 5),
                 InternalError);  // V > Vp
    y[1] = -1;
    classifier_forward(Tensor(losses.data(), {B, T}), Tensor(logits.data(), {B, T, 4}),
                       Tensor(y.data(), {B, T}, DType::kI32), V);
    EXPECT_NEAR(losses[0], std::log(3.0), 1e-6);  // uniform logits over V = 3 classes
    EXPECT_EQ(losses[1], 0.0f);
}

TEST(Ops, AttentionHeadsMustDivide) {
    std::vector<float> out(1 * 2 * 6), lse(1 * 4 * 2), qkv(1 * 2 * 18);
    EXPECT_THROW(attention_forward(Tensor(out.data(), {1, 2, 6}), Tensor(lse.data(), {1, 4, 2}),
                                   Tensor(qkv.data(), {1, 2, 18}), 4, 4),
                 InternalError);
    // NH = 3 query heads over KV = 2 key/value heads: not a grouping.
    std::vector<float> lse3(1 * 3 * 2);
    EXPECT_THROW(attention_forward(Tensor(out.data(), {1, 2, 6}), Tensor(lse3.data(), {1, 3, 2}),
                                   Tensor(qkv.data(), {1, 2, 14}), 3, 2),
                 InternalError);
    // Grouped-query qkv rows are C + 2*KV*HS wide: a GPT-2-width (3C) qkv for KV = 1 names the argument.
    try {
        attention_forward(Tensor(out.data(), {1, 2, 6}), Tensor(lse3.data(), {1, 3, 2}),
                          Tensor(qkv.data(), {1, 2, 18}), 3, 1);
        FAIL() << "expected InternalError for a qkv of the wrong width";
    } catch (const InternalError& e) {
        EXPECT_NE(std::string(e.what()).find("qkv"), std::string::npos) << e.what();
    }
}

// The LLaMA ops' argument checks name the op and the argument.
TEST(Ops, LlamaOpsValidateShapes) {
    std::vector<float> a(2 * 3 * 8), b(2 * 3 * 4), r(2 * 3), w(8), rope(5 * 4);
    auto expect_names = [](auto&& call, const char* what) {
        try {
            call();
            FAIL() << "expected InternalError naming " << what;
        } catch (const InternalError& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    };
    // rmsnorm: out (B,T,C) from inp (B,T,C) with a weight of C and eps > 0.
    const auto rmsnorm_with = [&](float* out, int64_t weight_len, float eps) {
        return [&, out, weight_len, eps] {
            rmsnorm_forward(Tensor(out, {2, 3, 8}), Tensor(r.data(), {2, 3}), Tensor(a.data(), {2, 3, 8}),
                            Tensor(w.data(), {weight_len}), eps);
        };
    };
    expect_names(rmsnorm_with(a.data(), 4, 1e-5f), "weight");
    expect_names(rmsnorm_with(b.data(), 8, 0.0f), "eps");
    // swiglu: out (...,F) against inp (...,2F).
    expect_names([&] { swiglu_forward(Tensor(a.data(), {2, 3, 8}), Tensor(a.data(), {2, 3, 8})); }, "out");
    expect_names([&] { swiglu_forward(Tensor(b.data(), {2, 3, 2}), Tensor(b.data(), {2, 3, 4})); }, "alias");
    // rope: qkv (B,T,(NH+2KV)*HS) with HS from the table (here 4): NH = 1, KV = 1 is 12 wide, not 8.
    expect_names([&] { rope_forward(Tensor(a.data(), {2, 3, 8}), Tensor(rope.data(), {5, 4}), 1, 1); }, "qkv");
    // Positions pos0..pos0+T-1 must be rows of the table (5 rows; T = 2 from pos0 = 4 is past the end).
    std::vector<float> q(1 * 2 * 12);
    expect_names([&] { rope_forward(Tensor(q.data(), {1, 2, 12}), Tensor(rope.data(), {5, 4}), 1, 1, 4); }, "table");
    rope_forward(Tensor(q.data(), {1, 2, 12}), Tensor(rope.data(), {5, 4}), 1, 1, 3);  // rows 3, 4: fine
}

// The optional fused outputs on the CPU: matmul_forward's residual is added to the product; the column-sum
// outputs of layernorm_backward and attention_backward add the column sums of the gradient they wrote
// (the bias gradient of the linear layer before them). Same fp32 arithmetic as doing it by hand, so the
// tolerance only covers summation order (1e-5 relative). Bad shapes and aliasing name the argument.
TEST(Ops, FusedResidualAndColumnSums) {
    const int B = 2, T = 5, C = 8, OC = 6, NH = 2;
    auto x = test::randn(B * T * C, 1), w = test::randn(OC * C, 2), b = test::randn(OC, 3),
         r = test::randn(B * T * OC, 4);
    std::vector<float> plain(B * T * OC), fused(B * T * OC);
    matmul_forward(Tensor(plain.data(), {B, T, OC}), Tensor(x.data(), {B, T, C}), Tensor(w.data(), {OC, C}),
                   Tensor(b.data(), {OC}));
    matmul_forward(Tensor(fused.data(), {B, T, OC}), Tensor(x.data(), {B, T, C}), Tensor(w.data(), {OC, C}),
                   Tensor(b.data(), {OC}), Tensor(r.data(), {B, T, OC}));
    for (size_t i = 0; i < plain.size(); i++) EXPECT_FLOAT_EQ(fused[i], plain[i] + r[i]) << i;
    try {
        matmul_forward(Tensor(fused.data(), {B, T, OC}), Tensor(x.data(), {B, T, C}), Tensor(w.data(), {OC, C}),
                       Tensor(b.data(), {OC}), Tensor(fused.data(), {B, T, OC}));
        FAIL() << "expected InternalError for a residual aliasing out";
    } catch (const InternalError& e) {
        EXPECT_NE(std::string(e.what()).find("residual"), std::string::npos) << e.what();
    }

    auto column_sums = [](const std::vector<float>& v, int cols, std::vector<float> init) {
        for (size_t i = 0; i < v.size(); i++) init[i % cols] += v[i];
        return init;
    };
    auto lx = test::randn(B * T * C, 5), lw = test::randn(C, 6), g = test::randn(B * T * C, 7);
    std::vector<float> mean(B * T), rstd(B * T), lo(B * T * C), zb(C, 0.0f);
    layernorm_forward(Tensor(lo.data(), {B, T, C}), Tensor(mean.data(), {B, T}), Tensor(rstd.data(), {B, T}),
                      Tensor(lx.data(), {B, T, C}), Tensor(lw.data(), {C}), Tensor(zb.data(), {C}), 1e-5f);
    auto di = test::randn(B * T * C, 8), cs = test::randn(C, 9);
    const auto cs0 = cs;
    std::vector<float> dw(C), db(C);
    layernorm_backward(Tensor(di.data(), {B, T, C}), Tensor(dw.data(), {C}), Tensor(db.data(), {C}),
                       Tensor(g.data(), {B, T, C}), Tensor(lx.data(), {B, T, C}), Tensor(lw.data(), {C}),
                       Tensor(mean.data(), {B, T}), Tensor(rstd.data(), {B, T}), Tensor(cs.data(), {C}));
    EXPECT_LE(test::rel_err(cs, column_sums(di, C, cs0)), 1e-5);
    EXPECT_THROW(layernorm_backward(Tensor(di.data(), {B, T, C}), Tensor(dw.data(), {C}), Tensor(db.data(), {C}),
                                    Tensor(g.data(), {B, T, C}), Tensor(lx.data(), {B, T, C}), Tensor(lw.data(), {C}),
                                    Tensor(mean.data(), {B, T}), Tensor(rstd.data(), {B, T}),
                                    Tensor(cs.data(), {C - 1})),
                 InternalError);

    const int AC = 4 * NH;  // head size 4
    auto qkv = test::randn(B * T * 3 * AC, 10), dy = test::randn(B * T * AC, 11), qcs = test::randn(3 * AC, 12);
    const auto qcs0 = qcs;
    std::vector<float> y(B * T * AC), lse(B * NH * T), dqkv(B * T * 3 * AC);
    attention_forward(Tensor(y.data(), {B, T, AC}), Tensor(lse.data(), {B, NH, T}), Tensor(qkv.data(), {B, T, 3 * AC}),
                      NH, NH);
    attention_backward(Tensor(dqkv.data(), {B, T, 3 * AC}), Tensor(dy.data(), {B, T, AC}),
                       Tensor(qkv.data(), {B, T, 3 * AC}), Tensor(y.data(), {B, T, AC}),
                       Tensor(lse.data(), {B, NH, T}), NH, NH, Tensor(qcs.data(), {3 * AC}));
    EXPECT_LE(test::rel_err(qcs, column_sums(dqkv, 3 * AC, qcs0)), 1e-5);
    {  // grouped-query: the column sums span the narrower qkv row (C + 2*KV*HS = 8 + 2*1*4)
        const int KV = 1, GW = AC + 2 * KV * 4;
        auto gq = test::randn(B * T * GW, 13), gcs = test::randn(GW, 14);
        const auto gcs0 = gcs;
        std::vector<float> gdqkv(B * T * GW);
        attention_forward(Tensor(y.data(), {B, T, AC}), Tensor(lse.data(), {B, NH, T}), Tensor(gq.data(), {B, T, GW}),
                          NH, KV);
        attention_backward(Tensor(gdqkv.data(), {B, T, GW}), Tensor(dy.data(), {B, T, AC}),
                           Tensor(gq.data(), {B, T, GW}), Tensor(y.data(), {B, T, AC}), Tensor(lse.data(), {B, NH, T}),
                           NH, KV, Tensor(gcs.data(), {GW}));
        EXPECT_LE(test::rel_err(gcs, column_sums(gdqkv, GW, gcs0)), 1e-5);
    }
    try {
        attention_backward(Tensor(dqkv.data(), {B, T, 3 * AC}), Tensor(dy.data(), {B, T, AC}),
                           Tensor(qkv.data(), {B, T, 3 * AC}), Tensor(y.data(), {B, T, AC}),
                           Tensor(lse.data(), {B, NH, T}), NH, NH, Tensor(qcs.data(), {AC}));
        FAIL() << "expected InternalError for a dqkv_colsum of the wrong width";
    } catch (const InternalError& e) {
        EXPECT_NE(std::string(e.what()).find("dqkv_colsum"), std::string::npos) << e.what();
    }
}

// adamw_update_runs on the CPU is the run-by-run adamw_update (decay only where asked, gaps untouched), and
// runs out of order or past the end name the op and the run.
TEST(Ops, AdamWRuns) {
    const int64_t N = 40;
    auto p = test::randn(N, 20), m = test::randn(N, 21, 0.01f), v = test::randn(N, 22, 0.01f), g = test::randn(N, 23);
    for (auto& e : v) e = std::fabs(e);
    const auto p2_orig = p;
    auto p2 = p, m2 = m, v2 = v;
    AdamWParams hp;
    hp.lr = 0.1f;
    hp.weight_decay = 0.5f;
    const std::vector<AdamWRun> runs = {{0, 7, true}, {7, 20, false}, {25, 40, true}};
    adamw_update_runs(Tensor(p.data(), {N}), Tensor(m.data(), {N}), Tensor(v.data(), {N}), Tensor(g.data(), {N}), hp,
                      runs);
    for (const AdamWRun& r : runs) {
        AdamWParams h = hp;
        if (!r.decay) h.weight_decay = 0.0f;
        const int64_t n = r.end - r.begin;
        adamw_update(Tensor(p2.data() + r.begin, {n}), Tensor(m2.data() + r.begin, {n}),
                     Tensor(v2.data() + r.begin, {n}), Tensor(g.data() + r.begin, {n}), h);
    }
    EXPECT_EQ(p, p2);
    EXPECT_EQ(m, m2);
    EXPECT_EQ(v, v2);
    for (int64_t i = 20; i < 25; i++) EXPECT_EQ(p[i], p2_orig[i]) << "the gap [20, 25) is not a run";
    try {
        adamw_update_runs(Tensor(p.data(), {N}), Tensor(m.data(), {N}), Tensor(v.data(), {N}), Tensor(g.data(), {N}),
                          hp, {{0, 10, true}, {5, 12, false}});
        FAIL() << "expected InternalError for overlapping runs";
    } catch (const InternalError& e) {
        EXPECT_NE(std::string(e.what()).find("adamw_update_runs: run 1"), std::string::npos) << e.what();
    }
    EXPECT_THROW(adamw_update_runs(Tensor(p.data(), {N}), Tensor(m.data(), {N}), Tensor(v.data(), {N}),
                                   Tensor(g.data(), {N}), hp, {{30, 41, true}}),
                 InternalError);
}

TEST(Ops, GemmBackendName) {
    const std::string name = gemm_backend_name();
    EXPECT_TRUE(name == "onednn" || name == "openblas") << name;
}

}  // namespace
}  // namespace llmt::kernels
