// The bf16 (mixed-precision) CUDA ops of kernels/ops.h against the fp32 CPU ops, on fresh random inputs
// (seed printed; replay with LLMT_TEST_SEED). Inputs are rounded to bf16 first and the CPU op runs on the
// same rounded values, so the comparison measures the kernels' own rounding: bf16 outputs (8 significant
// bits), fp32 accumulation. Outputs are NaN-poisoned first. Label `gpu`: skipped, saying so, without a GPU.
// Each comparison prints "[bf16-vs-cpu] <op/output> max rel err" = max |gpu - cpu| / max |cpu|.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/bf16.h"
#include "core/knobs.h"
#include "kernels/ops.h"
#include "kernels/packed_positions.h"
#include "kernels/test_util.h"

namespace llmt::kernels {
namespace {

using test::randint;
using test::randn;
using test::rel_err;

// Tolerances (relative to the reference's max |value|). A bf16 store rounds to 8 significant bits:
// 2^-9 = 2e-3 relative per element. Ops whose inputs are identical on both sides and which round once
// at the output (encoder, gelu, residual, layernorm forward, matmul with fp32 accumulation) stay within
// ~4e-3 => kTolOut 1e-2 (the "about 1e-2 relative for bf16 matmuls"). Backward ops that also
// round an intermediate to bf16 (dinp += into a bf16 buffer, dlogits, the DGELU epilogue's product) or
// that accumulate bf16-rounded gradients over many rows (dweight, dbias over BT rows) => kTolGrad 2e-2.
// Attention's tensor-core kernel rounds the probabilities to bf16 before P @ V => 2e-2 too.
// An fp32 path would pass these by far; a wrong index or a missing term fails them by orders of magnitude.
constexpr double kTolOut = 1e-2;
constexpr double kTolGrad = 2e-2;
// Stays fp32 end to end (losses from identical bf16 logits; AdamW's fp32 master update).
constexpr double kTolF32 = 1e-5;
// LayerNorm eps of the comparisons: not GPT-2's 1e-5, so a kernel (generic or vectorised) that dropped its
// eps argument would differ from the CPU by ~1% in rstd, beyond the 1e-4 rstd bound below.
constexpr float kLnEps = 0.1f;

uint32_t base_seed() {
    static const uint32_t s = [] {
        const char* e = std::getenv("LLMT_TEST_SEED");
        const uint32_t v = e ? static_cast<uint32_t>(std::strtoul(e, nullptr, 10)) : std::random_device{}();
        std::printf("[bf16-vs-cpu] seed %u (replay with LLMT_TEST_SEED=%u)\n", v, v);
        return v;
    }();
    return s;
}
uint32_t seed(uint32_t k) { return base_seed() * 7919u + k; }

// Rounds every element to the nearest bf16 value (in place) and returns the vector.
std::vector<float> rounded(std::vector<float> v) {
    for (auto& x : v) x = float_from_bf16(bf16_from_float(x));
    return v;
}

// One device tensor (f32, bf16 or i32) in its own Arena on the GPU, with float upload/download.
class Dev {
public:
    Dev(std::vector<int64_t> shape, DType dt) : dt_(dt) {
        arena_.add("t", std::move(shape), dt);
        arena_.allocate(false, Device::kCuda);
    }
    Tensor t() const { return arena_.view(0); }
    void upload(const std::vector<float>& v) {
        const Tensor d = t();
        EXPECT_EQ(static_cast<int64_t>(v.size()), d.numel());
        if (dt_ == DType::kBF16) {
            std::vector<uint16_t> b(v.size());
            for (size_t i = 0; i < v.size(); i++) b[i] = bf16_from_float(v[i]);
            copy(d, Tensor(b.data(), {d.numel()}, DType::kBF16));
        } else {
            copy(d, Tensor(const_cast<float*>(v.data()), {d.numel()}));
        }
    }
    void upload_ids(const std::vector<int32_t>& v) { copy(t(), Tensor(const_cast<int32_t*>(v.data()), {t().numel()}, DType::kI32)); }
    std::vector<float> download() const {
        const Tensor d = t();
        std::vector<float> v(static_cast<size_t>(d.numel()));
        if (dt_ == DType::kBF16) {
            std::vector<uint16_t> b(v.size());
            copy(Tensor(b.data(), {d.numel()}, DType::kBF16), d);
            for (size_t i = 0; i < v.size(); i++) v[i] = float_from_bf16(b[i]);
        } else {
            copy(Tensor(v.data(), {d.numel()}), d);
        }
        return v;
    }
    void poison() { upload(std::vector<float>(static_cast<size_t>(t().numel()), std::numeric_limits<float>::quiet_NaN())); }

private:
    DType dt_;
    Arena arena_;
};

Dev bf(const std::vector<float>& v, std::vector<int64_t> shape) {
    Dev d(std::move(shape), DType::kBF16);
    d.upload(v);
    return d;
}
Dev f32(const std::vector<float>& v, std::vector<int64_t> shape) {
    Dev d(std::move(shape), DType::kF32);
    d.upload(v);
    return d;
}
Tensor H(std::vector<float>& v, std::initializer_list<int64_t> shape) { return Tensor(v.data(), shape); }

void expect_close(const char* what, const std::vector<float>& gpu, const std::vector<float>& cpu, double tol) {
    const double e = rel_err(gpu, cpu);
    bool finite = true;
    for (float x : gpu) finite = finite && std::isfinite(x);
    std::printf("[bf16-vs-cpu] %-44s max rel err %.3e (tol %.0e)\n", what, e, tol);
    EXPECT_TRUE(finite) << what << ": non-finite value (an element left unwritten?)";
    EXPECT_LE(e, tol) << what;
}

// The fused classifier on the GPU (bf16 logits (1, R, Vp), dlogits written in place, fp32 losses) against
// the CPU op on the same bf16-rounded logits. `tag` names the case in the printed comparison lines.
void expect_classifier_matches_cpu(const std::string& tag, int R, int V, int Vp, const std::vector<float>& logits,
                                   std::vector<int32_t> tg, float scale) {
    std::vector<float> losses(R), dl = logits;
    classifier_forward_backward(H(losses, {1, R}), H(dl, {1, R, Vp}), Tensor(tg.data(), {1, R}, DType::kI32), scale,
                                V);
    Dev dlog = bf(logits, {1, R, Vp}), dlos({1, R}, DType::kF32), dtg({1, R}, DType::kI32);
    dtg.upload_ids(tg);
    dlos.poison();
    classifier_forward_backward(dlos.t(), dlog.t(), dtg.t(), scale, V);
    expect_close(("classifier losses (f32" + tag + ")").c_str(), dlos.download(), losses, kTolF32);
    expect_close(("classifier dlogits (in place" + tag + ")").c_str(), dlog.download(), dl, kTolOut);
}

class CudaBf16Ops : public ::testing::Test {
protected:
    void SetUp() override {
        if (device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    }
};

TEST_F(CudaBf16Ops, ConvertRoundTripAndCpuRefusal) {
    auto x = randn(1000, seed(1), 3.0f);
    Dev a = f32(x, {1000}), b({1000}, DType::kBF16), c({1000}, DType::kF32);
    convert(b.t(), a.t());
    convert(c.t(), b.t());
    EXPECT_EQ(c.download(), rounded(x));  // the device rounds to nearest even exactly like the host helper
    std::vector<uint16_t> h(4);
    std::vector<float> o(4);
    EXPECT_THROW(gelu_forward(Tensor(h.data(), {4}, DType::kBF16), Tensor(h.data(), {4}, DType::kBF16)), InternalError);
    (void)o;
}

TEST_F(CudaBf16Ops, EncoderLayerNormElementwise) {
    const int B = 3, T = 37, C = 96, V = 101, maxT = 64;
    auto ids = randint(B * T, V, seed(2));
    auto wte = rounded(randn(V * C, seed(3))), wpe = rounded(randn(maxT * C, seed(4)));
    std::vector<float> out(B * T * C);
    encoder_forward(H(out, {B, T, C}), Tensor(ids.data(), {B, T}, DType::kI32), H(wte, {V, C}), H(wpe, {maxT, C}));
    Dev did({B, T}, DType::kI32), dwte = bf(wte, {V, C}), dwpe = bf(wpe, {maxT, C}), dout({B, T, C}, DType::kBF16);
    did.upload_ids(ids);
    dout.poison();
    encoder_forward(dout.t(), did.t(), dwte.t(), dwpe.t());
    expect_close("encoder_forward out", dout.download(), out, kTolOut);
    auto g = rounded(randn(B * T * C, seed(5)));
    auto gwte = randn(V * C, seed(6)), gwpe = randn(maxT * C, seed(7));
    Dev dg = bf(g, {B, T, C}), dgwte = f32(gwte, {V, C}), dgwpe = f32(gwpe, {maxT, C});
    encoder_backward(H(gwte, {V, C}), H(gwpe, {maxT, C}), H(g, {B, T, C}), Tensor(ids.data(), {B, T}, DType::kI32));
    encoder_backward(dgwte.t(), dgwpe.t(), dg.t(), did.t());
    expect_close("encoder_backward dwte (f32 +=)", dgwte.download(), gwte, kTolF32);
    expect_close("encoder_backward dwpe (f32 +=)", dgwpe.download(), gwpe, kTolF32);

    // LayerNorm: fp32 statistics from bf16 inputs.
    auto x = rounded(randn(B * T * C, seed(10), 2.0f)), w = rounded(randn(C, seed(11))), b = rounded(randn(C, seed(12)));
    std::vector<float> lo(B * T * C), mean(B * T), rstd(B * T);
    layernorm_forward(H(lo, {B, T, C}), H(mean, {B, T}), H(rstd, {B, T}), H(x, {B, T, C}), H(w, {C}), H(b, {C}), kLnEps);
    Dev dx = bf(x, {B, T, C}), dw = bf(w, {C}), db = bf(b, {C}), dlo({B, T, C}, DType::kBF16), dm({B, T}, DType::kF32),
        dr({B, T}, DType::kF32);
    dlo.poison();
    layernorm_forward(dlo.t(), dm.t(), dr.t(), dx.t(), dw.t(), db.t(), kLnEps);
    expect_close("layernorm_forward out", dlo.download(), lo, kTolOut);
    expect_close("layernorm_forward rstd (f32)", dr.download(), rstd, 1e-4);
    auto gl = rounded(randn(B * T * C, seed(13))), gi = rounded(randn(B * T * C, seed(14)));
    auto gw = randn(C, seed(15)), gb = randn(C, seed(16));
    Dev dgl = bf(gl, {B, T, C}), dgi = bf(gi, {B, T, C}), dgw = f32(gw, {C}), dgb = f32(gb, {C});
    layernorm_backward(H(gi, {B, T, C}), H(gw, {C}), H(gb, {C}), H(gl, {B, T, C}), H(x, {B, T, C}), H(w, {C}),
                       H(mean, {B, T}), H(rstd, {B, T}));
    layernorm_backward(dgi.t(), dgw.t(), dgb.t(), dgl.t(), dx.t(), dw.t(), dm.t(), dr.t());
    expect_close("layernorm_backward dinp (bf16 +=)", dgi.download(), gi, kTolGrad);
    expect_close("layernorm_backward dweight (f32 +=)", dgw.download(), gw, kTolGrad);
    expect_close("layernorm_backward dbias (f32 +=)", dgb.download(), gb, kTolGrad);

    // GELU, residual.
    const int N = 5000;
    auto u = rounded(randn(N, seed(20), 2.0f)), v = rounded(randn(N, seed(21))), gu = rounded(randn(N, seed(22)));
    std::vector<float> ge(N), gd(N), rs(N);
    gelu_forward(H(ge, {N}), H(u, {N}));
    gelu_backward(H(gd, {N}), H(u, {N}), H(gu, {N}));
    residual_forward(H(rs, {N}), H(u, {N}), H(v, {N}));
    Dev du = bf(u, {N}), dv = bf(v, {N}), dgu = bf(gu, {N}), o1({N}, DType::kBF16), o2({N}, DType::kBF16),
        o3({N}, DType::kBF16);
    o1.poison();
    o2.poison();
    o3.poison();
    gelu_forward(o1.t(), du.t());
    gelu_backward(o2.t(), du.t(), dgu.t());
    residual_forward(o3.t(), du.t(), dv.t());
    expect_close("gelu_forward", o1.download(), ge, kTolOut);
    expect_close("gelu_backward", o2.download(), gd, kTolOut);
    expect_close("residual_forward", o3.download(), rs, kTolOut);
}

// Run with each setting of the GELU fusion knob (the tests below): the same references and tolerances.
void matmul_and_gelu_case() {
    const int BT = 96, C = 64, OC = 256;  // multiples of 8: cuBLASLt's bf16 epilogue alignment
    auto x = rounded(randn(BT * C, seed(30))), w = rounded(randn(OC * C, seed(31), 0.1f)), b = rounded(randn(OC, seed(32)));
    std::vector<float> out(BT * OC), pre(BT * OC), gel(BT * OC);
    matmul_forward(H(out, {BT, OC}), H(x, {BT, C}), H(w, {OC, C}), H(b, {OC}));
    matmul_forward_gelu(H(gel, {BT, OC}), H(pre, {BT, OC}), H(x, {BT, C}), H(w, {OC, C}), H(b, {OC}));
    Dev dx = bf(x, {BT, C}), dw = bf(w, {OC, C}), db = bf(b, {OC}), dout({BT, OC}, DType::kBF16),
        dpre({BT, OC}, DType::kBF16), dgel({BT, OC}, DType::kBF16);
    dout.poison();
    dpre.poison();
    dgel.poison();
    matmul_forward(dout.t(), dx.t(), dw.t(), db.t());
    matmul_forward_gelu(dgel.t(), dpre.t(), dx.t(), dw.t(), db.t());
    expect_close("matmul_forward out (bias epilogue)", dout.download(), out, kTolOut);
    expect_close("matmul_forward_gelu pre_gelu (aux)", dpre.download(), pre, kTolOut);
    expect_close("matmul_forward_gelu out (GELU epilogue)", dgel.download(), gel, kTolOut);

    // Backward: out = x @ w^T + b as above; the next layer's gradient g (BT, OC).
    auto g = rounded(randn(BT * OC, seed(33))), gw = randn(OC * C, seed(34)), gb = randn(OC, seed(35));
    std::vector<float> gi(BT * C);
    Dev dg = bf(g, {BT, OC}), dgi({BT, C}, DType::kBF16), dgw = f32(gw, {OC, C}), dgb = f32(gb, {OC});
    dgi.poison();
    matmul_backward(H(gi, {BT, C}), H(gw, {OC, C}), H(gb, {OC}), H(g, {BT, OC}), H(x, {BT, C}), H(w, {OC, C}));
    matmul_backward(dgi.t(), dgw.t(), dgb.t(), dg.t(), dx.t(), dw.t());
    expect_close("matmul_backward dinp", dgi.download(), gi, kTolOut);
    expect_close("matmul_backward dweight (f32 +=)", dgw.download(), gw, kTolOut);
    expect_close("matmul_backward dbias (f32 +=)", dgb.download(), gb, kTolOut);

    // Through a GELU: the layer above reads GELU(p) with p (BT, C) its pre-activation.
    auto pg = rounded(randn(BT * C, seed(36), 1.5f));
    std::vector<float> xg(BT * C), gi2(BT * C), gw2 = randn(OC * C, seed(37)), gb2 = randn(OC, seed(38));
    gelu_forward(H(xg, {BT, C}), H(pg, {BT, C}));
    xg = rounded(xg);
    // Device copies first: the CPU call below accumulates into gw2 and gb2.
    Dev dpg = bf(pg, {BT, C}), dxg = bf(xg, {BT, C}), dgi2({BT, C}, DType::kBF16), dgw2 = f32(gw2, {OC, C}),
        dgb2 = f32(gb2, {OC});
    matmul_backward_gelu(H(gi2, {BT, C}), H(pg, {BT, C}), H(gw2, {OC, C}), H(gb2, {OC}), H(g, {BT, OC}),
                         H(xg, {BT, C}), H(w, {OC, C}));
    dgi2.poison();
    matmul_backward_gelu(dgi2.t(), dpg.t(), dgw2.t(), dgb2.t(), dg.t(), dxg.t(), dw.t());
    expect_close("matmul_backward_gelu dinp (DGELU epilogue)", dgi2.download(), gi2, kTolGrad);
    expect_close("matmul_backward_gelu dweight (f32 +=)", dgw2.download(), gw2, kTolOut);
    expect_close("matmul_backward_gelu dbias (f32 +=)", dgb2.download(), gb2, kTolOut);
}

TEST_F(CudaBf16Ops, MatmulAndGeluEpilogues) { matmul_and_gelu_case(); }

// LLMTRAIN_GELU_FUSION=0: the GELU as separate kernels around plain GEMMs.
TEST_F(CudaBf16Ops, MatmulAndGeluUnfused) {
    const ScopedKnob unfused(Knob::kGeluFusion, "0");
    matmul_and_gelu_case();
}

// Attention on each bf16 path ops.cpp can take: cuDNN's engine (where libcudnn loads; else this pass runs
// the flash kernels again), our flash kernels (LLMTRAIN_CUDNN_ATTENTION=0) and the simple kernels
// (LLMTRAIN_FLASH_ATTENTION=0 as well). The tensor-core paths round P to bf16 before P @ V, the simple
// kernels only their bf16 outputs: kTolGrad bounds all three.
// KV < NH: grouped-query attention on the same paths (cuDNN's graph with K/V of KV heads and the dK/dV head
// reduction; the flash kernels' kv-head indexing and their per-group dK/dV sums; the simple kernels' loop).
// packed: positions of packed examples (one-token examples, examples crossing the 64-row tiles, a row that is
// one example); the "default" path then runs the flash kernels (cuDNN is not used with positions).
void attention_case(const std::string& path, int NH = 4, int KV = 4, bool packed = false) {
    const ScopedKnob cudnn(Knob::kCudnnAttention, path == "default" ? "1" : "0");
    const ScopedKnob flash(Knob::kFlashAttention, path == "simple" ? "0" : "1");
    const int B = 2, T = 100, HS = 64, C = NH * HS, C3 = C + 2 * KV * HS;
    const std::string tag = path + (KV == NH ? "" : " GQA " + std::to_string(NH) + "/" + std::to_string(KV)) +
                            (packed ? " packed" : "");
    std::vector<int32_t> pos = test::pack_rows({{1, 70, 1, 1, 27}, {100}}, T).positions;
    Dev dpos({B, T}, DType::kI32);
    dpos.upload_ids(pos);
    const Tensor P = packed ? Tensor(pos.data(), {B, T}, DType::kI32) : Tensor();
    const Tensor dP = packed ? dpos.t() : Tensor();
    auto qkv = rounded(randn(B * T * C3, seed(40)));
    std::vector<float> out(B * T * C), lse(B * NH * T);
    attention_forward(H(out, {B, T, C}), H(lse, {B, NH, T}), H(qkv, {B, T, C3}), NH, KV, P);
    Dev dqkv = bf(qkv, {B, T, C3}), dout({B, T, C}, DType::kBF16), dlse({B, NH, T}, DType::kF32);
    dout.poison();
    dlse.poison();
    attention_forward(dout.t(), dlse.t(), dqkv.t(), NH, KV, dP);
    expect_close(("attention_forward out " + tag).c_str(), dout.download(), out, kTolGrad);
    expect_close(("attention_forward lse (f32) " + tag).c_str(), dlse.download(), lse, kTolOut);
    auto go = rounded(randn(B * T * C, seed(41)));
    std::vector<float> gq(B * T * C3);
    // The CPU backward runs on the GPU's (bf16-rounded) forward output, as training does.
    auto gout = dout.download();
    auto glse = dlse.download();
    attention_backward(H(gq, {B, T, C3}), H(go, {B, T, C}), H(qkv, {B, T, C3}), H(gout, {B, T, C}),
                       H(glse, {B, NH, T}), NH, KV, {}, P);
    Dev dgo = bf(go, {B, T, C}), dgq({B, T, C3}, DType::kBF16);
    dgq.poison();
    attention_backward(dgq.t(), dgo.t(), dqkv.t(), dout.t(), dlse.t(), NH, KV, {}, dP);
    expect_close(("attention_backward dqkv " + tag).c_str(), dgq.download(), gq, kTolGrad);
}

TEST_F(CudaBf16Ops, AttentionClassifierAdamW) {
    for (const char* path : {"default", "flash", "simple"}) {
        SCOPED_TRACE(path);
        attention_case(path);
        attention_case(path, 8, 2);
        attention_case(path, 4, 1);
        attention_case(path, 4, 4, true);
        attention_case(path, 8, 2, true);
    }

    // Classifier over bf16 logits: fp32 losses, bf16 dlogits in place; padding columns and an ignored row.
    const int V = 1000, Vp = 1024, R = 6;
    auto logits = rounded(randn(R * Vp, seed(42), 3.0f));
    auto tg = randint(R, V, seed(43));
    tg[2] = -1;
    expect_classifier_matches_cpu("", R, V, Vp, logits, tg, 0.5f);

    // AdamW on fp32 master weights, writing the bf16 copy in the same pass.
    const int N = 3000;
    auto p = randn(N, seed(50)), m = randn(N, seed(51), 0.01f), v = randn(N, seed(52), 0.01f), gr = randn(N, seed(53));
    for (auto& e : v) e = std::fabs(e);
    AdamWParams hp;
    hp.lr = 1e-3f;
    hp.weight_decay = 0.1f;
    hp.grad_scale = 0.7f;
    hp.step = 3;
    Dev dp = f32(p, {N}), dm = f32(m, {N}), dv = f32(v, {N}), dgr = f32(gr, {N}), dlp({N}, DType::kBF16);
    dlp.poison();
    adamw_update(H(p, {N}), H(m, {N}), H(v, {N}), H(gr, {N}), hp);
    adamw_update(dp.t(), dm.t(), dv.t(), dgr.t(), hp, dlp.t());
    expect_close("adamw params (f32 master)", dp.download(), p, kTolF32);
    expect_close("adamw exp_avg_sq", dv.download(), v, kTolF32);
    EXPECT_EQ(dlp.download(), rounded(dp.download())) << "the bf16 copy is the rounded master weights";
}


// GPT-2 widths (C = 768, 1024: multiples of 256) take the vectorised LayerNorm kernels (forward with the
// row held in registers; backward with 16-byte loads, the dinp prefetch and per-warp partial rows), and
// the weight-gradient GEMM at GPT-2's MLP shape runs the algorithm timed among cuBLASLt's candidates (the
// trial runs must not touch the fp32 accumulator) and the batched bias-gradient kernel (whole blocks and
// a partial one).
// Same references and tolerances as above: the bias gradient sums BT bf16 values in fp32 (error well
// under kTolOut); a wrong column, a trial run leaking into dweight or a dropped "+=" is off by O(1).
TEST_F(CudaBf16Ops, GptWidthsLayerNormAndBiasGradient) {
    for (const int C : {768, 1024}) {
        const int B = 2, T = 33;
        auto x = randn(B * T * C, seed(100 + C), 2.0f), w = rounded(randn(C, seed(101 + C))),
             b = rounded(randn(C, seed(102 + C)));
        for (int i = 0; i < C; i++) x[C + i] += 5.0f;  // one row with a large mean: the variance's two passes matter
        x = rounded(x);  // after the shift, so both sides see the same bf16 values
        std::vector<float> lo(B * T * C), mean(B * T), rstd(B * T);
        layernorm_forward(H(lo, {B, T, C}), H(mean, {B, T}), H(rstd, {B, T}), H(x, {B, T, C}), H(w, {C}), H(b, {C}), kLnEps);
        Dev dx = bf(x, {B, T, C}), dw = bf(w, {C}), db = bf(b, {C}), dlo({B, T, C}, DType::kBF16),
            dm({B, T}, DType::kF32), dr({B, T}, DType::kF32);
        dlo.poison();
        dm.poison();
        dr.poison();
        layernorm_forward(dlo.t(), dm.t(), dr.t(), dx.t(), dw.t(), db.t(), kLnEps);
        const std::string c = " C=" + std::to_string(C);
        expect_close(("layernorm_forward out" + c).c_str(), dlo.download(), lo, kTolOut);
        expect_close(("layernorm_forward mean (f32)" + c).c_str(), dm.download(), mean, 1e-5);
        expect_close(("layernorm_forward rstd (f32)" + c).c_str(), dr.download(), rstd, 1e-4);
        // Backward from the CPU statistics (uploaded), accumulating into random dinp/dweight/dbias.
        auto gl = rounded(randn(B * T * C, seed(103 + C))), gi = rounded(randn(B * T * C, seed(104 + C)));
        auto gw = randn(C, seed(105 + C)), gb = randn(C, seed(106 + C));
        Dev dgl = bf(gl, {B, T, C}), dgi = bf(gi, {B, T, C}), dgw = f32(gw, {C}), dgb = f32(gb, {C}),
            dmean = f32(mean, {B, T}), drstd = f32(rstd, {B, T});
        layernorm_backward(H(gi, {B, T, C}), H(gw, {C}), H(gb, {C}), H(gl, {B, T, C}), H(x, {B, T, C}), H(w, {C}),
                           H(mean, {B, T}), H(rstd, {B, T}));
        layernorm_backward(dgi.t(), dgw.t(), dgb.t(), dgl.t(), dx.t(), dw.t(), dmean.t(), drstd.t());
        expect_close(("layernorm_backward dinp (bf16 +=)" + c).c_str(), dgi.download(), gi, kTolGrad);
        expect_close(("layernorm_backward dweight (f32 +=)" + c).c_str(), dgw.download(), gw, kTolGrad);
        expect_close(("layernorm_backward dbias (f32 +=)" + c).c_str(), dgb.download(), gb, kTolGrad);
    }

    const int BT = 520, C = 768, OC = 3072;  // 16 whole 32-row blocks of the bias kernel, then an 8-row tail
    auto x = rounded(randn(BT * C, seed(110))), w = rounded(randn(OC * C, seed(111), 0.05f));
    auto g = rounded(randn(BT * OC, seed(112))), gw = randn(OC * C, seed(113)), gb = randn(OC, seed(114));
    std::vector<float> gi(BT * C);
    Dev dx = bf(x, {BT, C}), dw = bf(w, {OC, C}), dg = bf(g, {BT, OC}), dgi({BT, C}, DType::kBF16),
        dgw = f32(gw, {OC, C}), dgb = f32(gb, {OC});
    matmul_backward(H(gi, {BT, C}), H(gw, {OC, C}), H(gb, {OC}), H(g, {BT, OC}), H(x, {BT, C}), H(w, {OC, C}));
    for (int rep = 0; rep < 2; rep++) {  // the second call runs the tuned algorithm; both accumulate
        dgi.poison();
        matmul_backward(dgi.t(), dgw.t(), dgb.t(), dg.t(), dx.t(), dw.t());
        if (rep == 0) {
            matmul_backward(Tensor(), H(gw, {OC, C}), H(gb, {OC}), H(g, {BT, OC}), H(x, {BT, C}), H(w, {OC, C}));
        }
    }
    expect_close("matmul_backward dinp (GPT-2 MLP shape)", dgi.download(), gi, kTolOut);
    expect_close("matmul_backward dweight (f32 +=, twice)", dgw.download(), gw, kTolOut);
    expect_close("matmul_backward dbias (f32 +=, twice)", dgb.download(), gb, kTolOut);

    // The fused classifier at GPT-2's vocabulary (V = 50257 padded to 50304: a padded tail inside the last
    // 16-byte vector of real columns), a few rows, one target on the last real column, one ignored.
    const int R = 5, V = 50257, Vp = 50304;
    auto logits = rounded(randn(R * Vp, seed(120), 3.0f));
    std::vector<int32_t> tg = randint(R, V, seed(121));
    tg[1] = V - 1;  // the last real column
    tg[3] = -1;
    // Losses: fp32 sums of 50257 exponentials on both sides (fast __expf on the GPU: ~2 ulp) => 1e-5.
    expect_classifier_matches_cpu(", V=50257", R, V, Vp, logits, tg, 0.25f);
}

// AdamW over many runs of one buffer in one launch (per 128 runs) against the CPU's run-by-run update: 300
// runs (three tables) of odd lengths, so runs start and end inside 16-byte groups, with gaps between some
// (left untouched) and decay on every other run. fp32 throughout => kTolF32; a run given the wrong decay,
// a skipped or doubly-updated element, or a touched gap is off by far more.
void adamw_runs_case() {
    std::vector<AdamWRun> runs;
    int64_t at = 0;
    for (int r = 0; r < 300; r++) {
        const int64_t len = 1 + (r * 37) % 61;
        runs.push_back({at, at + len, r % 2 == 0});
        at += len + (r % 7 == 3 ? 5 : 0);  // a gap after some runs
    }
    const int64_t N = at + 3;
    auto p = randn(N, seed(160)), m = randn(N, seed(161), 0.01f), v = randn(N, seed(162), 0.01f),
         gr = randn(N, seed(163));
    for (auto& e : v) e = std::fabs(e);
    AdamWParams hp;
    hp.lr = 1e-2f;
    hp.weight_decay = 0.5f;
    hp.grad_scale = 0.9f;
    hp.step = 4;
    Dev dp = f32(p, {N}), dm = f32(m, {N}), dv = f32(v, {N}), dgr = f32(gr, {N}), dlp({N}, DType::kBF16);
    dlp.poison();
    adamw_update_runs(H(p, {N}), H(m, {N}), H(v, {N}), H(gr, {N}), hp, runs);
    adamw_update_runs(dp.t(), dm.t(), dv.t(), dgr.t(), hp, runs, dlp.t());
    expect_close("adamw_update_runs params (300 runs)", dp.download(), p, kTolF32);
    expect_close("adamw_update_runs exp_avg", dm.download(), m, kTolF32);
    expect_close("adamw_update_runs exp_avg_sq", dv.download(), v, kTolF32);
    // The bf16 copy: the rounded update inside runs; the poison (NaN) left in the gaps.
    const auto lp = dlp.download(), pd = dp.download();
    size_t inside = 0, gaps_untouched = 0, gaps = 0;
    for (int64_t i = 0, r = 0; i < N; i++) {
        while (r < static_cast<int64_t>(runs.size()) && runs[r].end <= i) r++;
        const bool in = r < static_cast<int64_t>(runs.size()) && runs[r].begin <= i;
        if (in) inside += lp[i] == float_from_bf16(bf16_from_float(pd[i]));
        else {
            gaps++;
            gaps_untouched += std::isnan(lp[i]);
        }
    }
    EXPECT_EQ(inside, static_cast<size_t>(N) - gaps) << "the bf16 copy is the rounded master weights in every run";
    EXPECT_EQ(gaps_untouched, gaps) << "elements between runs are not written";
}

TEST_F(CudaBf16Ops, AdamWRunsInOneLaunch) { adamw_runs_case(); }

// LLMTRAIN_ADAMW_RUNS=0 (one launch per run, the path misaligned arenas take) gives the same results.
TEST_F(CudaBf16Ops, AdamWRunsOneLaunchEach) {
    const ScopedKnob per_run(Knob::kAdamwRuns, "0");
    adamw_runs_case();
}

// The fusions GPT-2's step uses without dropout: the residual add as cuBLASLt's C matrix (out = residual +
// x @ w^T + b, rounded once), and bias gradients taken as column sums inside the passes that produce the
// gradient: LayerNorm backward's dinp (C = 768: the vectorised kernel's third partial row; C = 320: the
// generic kernel, then the column-sum kernel) and attention backward's dqkv (the flash kernels' dK/dV
// epilogue and dQ conversion, HS 64 and 128; with cuDNN's attention, the separate column-sum pass). Each
// runs with its ops-level knob on and off (off: the unfused kernels), the attention with the flash
// kernels and with cuDNN (where libcudnn loads), against the CPU ops on the same bf16 inputs. Tolerances as above: the outputs round
// once (kTolOut); the column sums add BT values that were rounded to bf16 on one side only (kTolGrad). A
// missed row, a column of the wrong head or a dropped "+=" is off by O(1).
TEST_F(CudaBf16Ops, FusedResidualAndBiasColumnSums) {
    for (const char* knob : {"1", "0", "cudnn"}) {
        const bool cudnn = std::string(knob) == "cudnn";
        const ScopedKnob residual(Knob::kFuseResidual, cudnn ? "1" : knob);
        const ScopedKnob ln_colsum(Knob::kFuseLnColsum, cudnn ? "1" : knob);
        const ScopedKnob attn_colsum(Knob::kFuseAttnColsum, cudnn ? "1" : knob);
        const ScopedKnob cudnn_attention(Knob::kCudnnAttention, cudnn ? "1" : "0");
        const std::string k = std::string(" knob=") + knob;
        {
            const int BT = 200, C = 256, OC = 768;
            auto x = rounded(randn(BT * C, seed(130))), w = rounded(randn(OC * C, seed(131), 0.1f)),
                 b = rounded(randn(OC, seed(132))), r = rounded(randn(BT * OC, seed(133), 2.0f));
            std::vector<float> out(BT * OC);
            matmul_forward(H(out, {BT, OC}), H(x, {BT, C}), H(w, {OC, C}), H(b, {OC}), H(r, {BT, OC}));
            Dev dx = bf(x, {BT, C}), dw = bf(w, {OC, C}), db = bf(b, {OC}), dr = bf(r, {BT, OC}),
                dout({BT, OC}, DType::kBF16);
            for (int rep = 0; rep < 2; rep++) {  // the first call times cuBLASLt's candidates, the second not
                dout.poison();
                matmul_forward(dout.t(), dx.t(), dw.t(), db.t(), dr.t());
                expect_close(("matmul_forward + residual" + k).c_str(), dout.download(), out, kTolOut);
            }
            EXPECT_EQ(dr.download(), r) << "the residual input is read, never written";
        }
        for (const int C : {768, 320}) {
            const int B = 3, T = 37;
            auto x = rounded(randn(B * T * C, seed(140 + C), 2.0f)), w = rounded(randn(C, seed(141 + C)));
            auto gl = rounded(randn(B * T * C, seed(142 + C))), gi = rounded(randn(B * T * C, seed(143 + C)));
            auto gw = randn(C, seed(144 + C)), gb = randn(C, seed(145 + C)), cs = randn(C, seed(146 + C));
            std::vector<float> lo(B * T * C), mean(B * T), rstd(B * T), bias(C, 0.0f);
            layernorm_forward(H(lo, {B, T, C}), H(mean, {B, T}), H(rstd, {B, T}), H(x, {B, T, C}), H(w, {C}),
                              H(bias, {C}), kLnEps);
            Dev dgl = bf(gl, {B, T, C}), dgi = bf(gi, {B, T, C}), dgw = f32(gw, {C}), dgb = f32(gb, {C}),
                dcs = f32(cs, {C}), dx = bf(x, {B, T, C}), dw = bf(w, {C}), dmean = f32(mean, {B, T}),
                drstd = f32(rstd, {B, T});
            layernorm_backward(H(gi, {B, T, C}), H(gw, {C}), H(gb, {C}), H(gl, {B, T, C}), H(x, {B, T, C}),
                               H(w, {C}), H(mean, {B, T}), H(rstd, {B, T}), H(cs, {C}));
            layernorm_backward(dgi.t(), dgw.t(), dgb.t(), dgl.t(), dx.t(), dw.t(), dmean.t(), drstd.t(), dcs.t());
            const std::string c = " C=" + std::to_string(C) + k;
            expect_close(("layernorm_backward dinp (bf16 +=)" + c).c_str(), dgi.download(), gi, kTolGrad);
            expect_close(("layernorm_backward dweight" + c).c_str(), dgw.download(), gw, kTolGrad);
            expect_close(("layernorm_backward dinp column sums (+=)" + c).c_str(), dcs.download(), cs, kTolGrad);
        }
        // (HS, B, T, NH, KV): multi-head; grouped-query with the query heads of a kv head split over blocks
        // (dK/dV through the fp32 accumulator) and, at 4 x 1100 x 16/8 (288 key blocks of 128 per head pair on
        // an H100's 132 SMs), walked by one block each (dK/dV summed in registers).
        for (const auto& [HS, B, T, NH, KV] : std::vector<std::array<int, 5>>{
                 {64, 2, 150, 3, 3}, {128, 2, 150, 3, 3}, {64, 2, 150, 4, 2}, {128, 1, 150, 4, 1}, {64, 4, 1100, 16, 8}}) {
            const int C = NH * HS, C3 = C + 2 * KV * HS;  // T: a partial tile at the end
            auto qkv = rounded(randn(B * T * C3, seed(150 + HS)));
            Dev dqkv = bf(qkv, {B, T, C3}), dout({B, T, C}, DType::kBF16), dlse({B, NH, T}, DType::kF32);
            attention_forward(dout.t(), dlse.t(), dqkv.t(), NH, KV);
            auto out = dout.download(), lse = dlse.download();
            auto go = rounded(randn(B * T * C, seed(151 + HS))), cs = randn(C3, seed(152 + HS));
            std::vector<float> gq(B * T * C3);
            Dev dgo = bf(go, {B, T, C}), dgq({B, T, C3}, DType::kBF16), dcs = f32(cs, {C3});
            attention_backward(H(gq, {B, T, C3}), H(go, {B, T, C}), H(qkv, {B, T, C3}), H(out, {B, T, C}),
                               H(lse, {B, NH, T}), NH, KV, H(cs, {C3}));
            dgq.poison();
            attention_backward(dgq.t(), dgo.t(), dqkv.t(), dout.t(), dlse.t(), NH, KV, dcs.t());
            const std::string h = " HS=" + std::to_string(HS) + " heads " + std::to_string(NH) + "/" +
                                  std::to_string(KV) + " B=" + std::to_string(B) + k;
            expect_close(("attention_backward dqkv" + h).c_str(), dgq.download(), gq, kTolGrad);
            expect_close(("attention_backward dqkv column sums (+=)" + h).c_str(), dcs.download(), cs, kTolGrad);
        }
    }
}

}  // namespace
}  // namespace llmt::kernels

namespace llmt::kernels {
namespace {

// The LLaMA ops in bf16 against the fp32 CPU ops on the same bf16-rounded inputs. Tolerances as above: one
// rounding at the output (RMSNorm forward, its residual add, SwiGLU, RoPE) => kTolOut; rstd is fp32 from
// identical inputs (sums of C squares in another order) => 1e-4, as LayerNorm's; RMSNorm's backward adds into
// a bf16 dinp and sums bf16-rounded products over rows into dweight => kTolGrad. Widths: RMSNorm C = 2048
// (Llama-3.2-1B: the forward's 8 16-byte groups per lane in registers; RmsNormBackwardShapes below covers the
// backward's paths), 768 (a partial last group per warp), 100 (not a multiple of 8 bf16: the scalar forward,
// the backward's one-element groups); SwiGLU F = 256 (16-byte chunks) and 100 (elements); RoPE HS = 64
// with Llama-3.2-1B's 32 query / 8 kv heads (8 pairs per thread) and HS = 20 (one pair per thread).
TEST_F(CudaBf16Ops, LlamaOps) {
    for (const int C : {2048, 768, 100}) {
        const int B = 2, T = 37;
        const std::string c = " C=" + std::to_string(C);
        auto x = rounded(randn(B * T * C, seed(400 + C), 2.0f)), w = rounded(randn(C, seed(401 + C)));
        std::vector<float> out(B * T * C), rstd(B * T);
        rmsnorm_forward(H(out, {B, T, C}), H(rstd, {B, T}), H(x, {B, T, C}), H(w, {C}), kLnEps);
        Dev dx = bf(x, {B, T, C}), dw = bf(w, {C}), dout({B, T, C}, DType::kBF16), drstd({B, T}, DType::kF32);
        dout.poison();
        drstd.poison();
        rmsnorm_forward(dout.t(), drstd.t(), dx.t(), dw.t(), kLnEps);
        expect_close(("rmsnorm_forward out" + c).c_str(), dout.download(), out, kTolOut);
        expect_close(("rmsnorm_forward rstd (f32)" + c).c_str(), drstd.download(), rstd, 1e-4);

        auto g = rounded(randn(B * T * C, seed(402 + C))), gi = rounded(randn(B * T * C, seed(403 + C)));
        auto gw = randn(C, seed(404 + C));
        Dev dg = bf(g, {B, T, C}), dgi = bf(gi, {B, T, C}), dgw = f32(gw, {C}), dr = f32(rstd, {B, T});
        rmsnorm_backward(H(gi, {B, T, C}), H(gw, {C}), H(g, {B, T, C}), H(x, {B, T, C}), H(w, {C}), H(rstd, {B, T}));
        rmsnorm_backward(dgi.t(), dgw.t(), dg.t(), dx.t(), dw.t(), dr.t());
        expect_close(("rmsnorm_backward dinp (bf16 +=)" + c).c_str(), dgi.download(), gi, kTolGrad);
        expect_close(("rmsnorm_backward dweight (f32 +=)" + c).c_str(), dgw.download(), gw, kTolGrad);

        // The residual add fused in front: residual_out = bf16(x + y), normalised from the rounded values.
        auto y = rounded(randn(B * T * C, seed(405 + C)));
        std::vector<float> h(B * T * C), o2(B * T * C), r2(B * T);
        for (size_t i = 0; i < h.size(); i++) h[i] = x[i] + y[i];
        h = rounded(h);
        rmsnorm_forward(H(o2, {B, T, C}), H(r2, {B, T}), H(h, {B, T, C}), H(w, {C}), kLnEps);
        Dev dy = bf(y, {B, T, C}), dh({B, T, C}, DType::kBF16);
        dh.poison();
        dout.poison();
        residual_rmsnorm_forward(dh.t(), dout.t(), drstd.t(), dx.t(), dy.t(), dw.t(), kLnEps);
        EXPECT_EQ(dh.download(), h) << "residual_out is the rounded sum" << c;
        expect_close(("residual_rmsnorm_forward out" + c).c_str(), dout.download(), o2, kTolOut);
        expect_close(("residual_rmsnorm_forward rstd (f32)" + c).c_str(), drstd.download(), r2, 1e-4);
    }
    for (const int F : {256, 100}) {
        const int N = 37;
        const std::string f = " F=" + std::to_string(F);
        auto x = rounded(randn(N * 2 * F, seed(420 + F), 3.0f)), g = rounded(randn(N * F, seed(421 + F)));
        std::vector<float> out(N * F), dx(N * 2 * F);
        swiglu_forward(H(out, {N, F}), H(x, {N, 2 * F}));
        swiglu_backward(H(dx, {N, 2 * F}), H(g, {N, F}), H(x, {N, 2 * F}));
        Dev ddx = bf(x, {N, 2 * F}), dg = bf(g, {N, F}), dout({N, F}, DType::kBF16), dgx({N, 2 * F}, DType::kBF16);
        dout.poison();
        dgx.poison();
        swiglu_forward(dout.t(), ddx.t());
        swiglu_backward(dgx.t(), dg.t(), ddx.t());
        expect_close(("swiglu_forward" + f).c_str(), dout.download(), out, kTolOut);
        expect_close(("swiglu_backward" + f).c_str(), dgx.download(), dx, kTolOut);
    }
    for (const auto& [HS, NH, KV] : std::vector<std::array<int, 3>>{{64, 32, 8}, {20, 4, 2}}) {
        const int B = 2, T = 33, C3 = (NH + 2 * KV) * HS, pos0 = 7, Tmax = T + pos0;
        const std::string hs = " HS=" + std::to_string(HS) + " heads " + std::to_string(NH) + "/" + std::to_string(KV);
        std::vector<float> table(Tmax * HS);
        for (int p = 0; p < Tmax; p++)
            for (int i = 0; i < HS / 2; i++) {
                const double a = p * std::pow(500000.0, -2.0 * i / HS);
                table[p * HS + i] = static_cast<float>(std::cos(a));
                table[p * HS + HS / 2 + i] = static_cast<float>(std::sin(a));
            }
        auto x = rounded(randn(B * T * C3, seed(430 + HS))), g = rounded(randn(B * T * C3, seed(431 + HS)));
        Dev dx = bf(x, {B, T, C3}), dg = bf(g, {B, T, C3}), dt = f32(table, {Tmax, HS});
        rope_forward(H(x, {B, T, C3}), H(table, {Tmax, HS}), NH, KV, pos0);
        rope_forward(dx.t(), dt.t(), NH, KV, pos0);
        expect_close(("rope_forward (pos0 7)" + hs).c_str(), dx.download(), x, kTolOut);
        rope_backward(H(g, {B, T, C3}), H(table, {Tmax, HS}), NH, KV);
        rope_backward(dg.t(), dt.t(), NH, KV);
        expect_close(("rope_backward" + hs).c_str(), dg.download(), g, kTolOut);
    }
}

// rmsnorm_backward in bf16 (cuda/rmsnorm.cu) at Llama-3.2-1B's width over row counts of 1, a few and thousands
// (8198 = 2 x 4099 is no multiple of the 4 rows a step takes, and gives each block many steps), and its other
// paths: 16-byte groups with a partly idle last warp (C = 2056: 257 groups), 2 and 4 groups per thread
// (C = 8192, 16384), one-element groups (C = 1001, 2047: C % 8 != 0), and C = 2049 (wider than a block holds in
// one-element groups: the scalar kernel with atomics). Each case runs twice from the same dinp/dweight: the same
// bits both times where dweight goes through block partials, and both within kTolGrad of the CPU op.
TEST_F(CudaBf16Ops, RmsNormBackwardShapes) {
    struct Case {
        int B, T, C;
        bool deterministic;
    };
    for (const Case k : {Case{1, 1, 2048, true}, Case{1, 7, 2048, true}, Case{2, 4099, 2048, true},
                         Case{3, 5, 2056, true}, Case{1, 9, 8192, true}, Case{1, 5, 16384, true},
                         Case{2, 37, 1001, true}, Case{1, 41, 2047, true}, Case{2, 37, 2049, false}}) {
        const int B = k.B, T = k.T, C = k.C;
        const std::string c = " B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C);
        auto x = rounded(randn(B * T * C, seed(440 + C + T), 2.0f)), w = rounded(randn(C, seed(441 + C + T)));
        auto g = rounded(randn(B * T * C, seed(442 + C + T))), gi = rounded(randn(B * T * C, seed(443 + C + T)));
        auto gw = randn(C, seed(444 + C + T));
        std::vector<float> out(B * T * C), rstd(B * T);
        rmsnorm_forward(H(out, {B, T, C}), H(rstd, {B, T}), H(x, {B, T, C}), H(w, {C}), kLnEps);
        Dev dx = bf(x, {B, T, C}), dw = bf(w, {C}), dg = bf(g, {B, T, C}), dr = f32(rstd, {B, T});
        std::vector<float> runs_dinp[2], runs_dw[2];
        for (int run = 0; run < 2; run++) {
            Dev dgi = bf(gi, {B, T, C}), dgw = f32(gw, {C});
            rmsnorm_backward(dgi.t(), dgw.t(), dg.t(), dx.t(), dw.t(), dr.t());
            runs_dinp[run] = dgi.download();
            runs_dw[run] = dgw.download();
        }
        rmsnorm_backward(H(gi, {B, T, C}), H(gw, {C}), H(g, {B, T, C}), H(x, {B, T, C}), H(w, {C}), H(rstd, {B, T}));
        for (int run = 0; run < 2; run++) {
            const std::string r = c + (run ? " (run 2)" : "");
            expect_close(("rmsnorm_backward dinp (bf16 +=)" + r).c_str(), runs_dinp[run], gi, kTolGrad);
            expect_close(("rmsnorm_backward dweight (f32 +=)" + r).c_str(), runs_dw[run], gw, kTolGrad);
        }
        // EXPECT_TRUE, not EXPECT_EQ: a failure must not print millions of elements.
        EXPECT_TRUE(runs_dinp[0] == runs_dinp[1]) << "dinp differs between two runs" << c;
        if (k.deterministic) {
            EXPECT_TRUE(runs_dw[0] == runs_dw[1]) << "dweight differs between two runs" << c;
        }
    }
}

}  // namespace
}  // namespace llmt::kernels
