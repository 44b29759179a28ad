// Every CUDA op of kernels/ops.h against the CPU op on fresh random inputs (a new seed each run, printed
// so a failure can be replayed with LLMT_TEST_SEED). Label `gpu`: skipped, saying so, where no CUDA
// device exists (or the build has no CUDA). Device tensors live in Arenas allocated on Device::kCuda, so
// the allocator hook, copies and zero() are exercised too. Outputs the ops overwrite are poisoned with
// NaN first, so an element the kernel forgets to write fails the comparison.
// Each comparison prints "[cuda-vs-cpu] <op/output> max rel err" = max |gpu - cpu| / max |cpu|.
#include <gtest/gtest.h>

#include <algorithm>
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

// fp32 tolerances. Both backends compute in fp32 with fp32 accumulators (cuBLASLt in CUBLAS_COMPUTE_32F,
// no TF32); they differ only in summation order and in libm vs CUDA math functions (a few ulp). A sum of
// n terms in another order differs by ~ sqrt(n) * 6e-8 relative typically:
//  - element-wise ops (gelu, residual, dropout, adamw, scale): a few ulp => 1e-5 (seen <= 1.1e-6 on an
//    H200, 2026-11-26: gelu_backward, whose tanh comes from different formulas on the two sides).
//  - reductions over C, HS, K <= 300 or V = 1000 (layernorm, attention, matmul, classifier, encoder
//    scatter): sqrt(300) * 6e-8 ~ 1e-6 => 2e-5 (seen <= 7.1e-7).
//  - backward passes chain two or three such sums => 5e-5 (seen <= 4.9e-7).
// A TF32 or bf16 path would fail these by orders of magnitude (~1e-3), so they do discriminate.
constexpr double kTolElementwise = 1e-5;
constexpr double kTolReduce = 2e-5;
constexpr double kTolBackward = 5e-5;
// LayerNorm eps of the GPU-vs-CPU comparison: not GPT-2's 1e-5, so a kernel that dropped its eps argument
// (or hard-coded one) would differ from the CPU by ~1% in rstd, far above kTolReduce.
constexpr float kLnEps = 0.1f;

uint32_t base_seed() {
    static const uint32_t s = [] {
        const char* e = std::getenv("LLMT_TEST_SEED");
        const uint32_t v = e ? static_cast<uint32_t>(std::strtoul(e, nullptr, 10)) : std::random_device{}();
        std::printf("[cuda-vs-cpu] seed %u (replay with LLMT_TEST_SEED=%u)\n", v, v);
        return v;
    }();
    return s;
}
uint32_t seed(uint32_t k) { return base_seed() * 7919u + k; }

// One device tensor in its own Arena on Device::kCuda.
class Dev {
public:
    explicit Dev(std::vector<int64_t> shape, DType dt = DType::kF32) {
        arena_.add("t", std::move(shape), dt);
        arena_.allocate(false, Device::kCuda);
    }
    Tensor t() const { return arena_.view(0); }
    template <typename T>
    void upload(const std::vector<T>& v) {
        Tensor d = t();
        EXPECT_EQ(static_cast<int64_t>(v.size()), d.numel());
        copy(d, host_like(d, const_cast<T*>(v.data())));
    }
    template <typename T>
    std::vector<T> download() const {
        Tensor d = t();
        std::vector<T> v(static_cast<size_t>(d.numel()));
        copy(host_like(d, v.data()), d);
        return v;
    }
    void poison() {
        upload(std::vector<float>(static_cast<size_t>(t().numel()), std::numeric_limits<float>::quiet_NaN()));
    }

private:
    static Tensor host_like(const Tensor& d, void* p) {
        Tensor h = d;
        h.data = p;
        h.device = Device::kCpu;
        return h;
    }
    Arena arena_;
};

// A host tensor over a vector.
template <typename T>
Tensor H(std::vector<T>& v, std::initializer_list<int64_t> shape, DType dt = DType::kF32) {
    return Tensor(v.data(), shape, dt);
}

template <typename T>
Dev D(const std::vector<T>& v, std::vector<int64_t> shape, DType dt = DType::kF32) {
    Dev d(std::move(shape), dt);
    d.upload(v);
    return d;
}

void expect_close(const char* what, const std::vector<float>& gpu, const std::vector<float>& cpu, double tol) {
    const double e = rel_err(gpu, cpu);
    bool finite = true;
    for (float x : gpu) finite = finite && std::isfinite(x);
    std::printf("[cuda-vs-cpu] %-44s max rel err %.3e (tol %.0e)\n", what, e, tol);
    EXPECT_TRUE(finite) << what << ": non-finite value (an element left unwritten?)";
    EXPECT_LE(e, tol) << what;
}

class CudaOps : public ::testing::Test {
protected:
    void SetUp() override {
        if (device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    }
};

TEST_F(CudaOps, DeviceArenaZeroCopyRoundTrip) {
    Arena a;
    a.add("x", {3, 5});
    a.add("y", {7});
    a.allocate(true, Device::kCuda);
    EXPECT_EQ(a.device(), Device::kCuda);
    EXPECT_EQ(a.view("x").device, Device::kCuda);
    std::vector<float> back(15, 1.0f);
    copy(Tensor(back.data(), {3, 5}), a.view("x"));
    for (float v : back) EXPECT_EQ(v, 0.0f);
    auto x = randn(15, seed(1));
    copy(a.view("x"), Tensor(x.data(), {3, 5}));
    Arena m = a.mirror();  // same layout, zeroed, on the device
    EXPECT_EQ(m.device(), Device::kCuda);
    copy(m.view("x"), a.view("x"));  // device to device
    copy(Tensor(back.data(), {3, 5}), m.view("x"));
    EXPECT_EQ(back, x);
    zero(m.view("x"));
    copy(Tensor(back.data(), {3, 5}), m.view("x"));
    for (float v : back) EXPECT_EQ(v, 0.0f);
}

TEST_F(CudaOps, Encoder) {
    const int B = 3, T = 37, C = 96, V = 101, maxT = 64;
    auto inp = randint(B * T, V, seed(2));
    auto wte = randn(V * C, seed(3)), wpe = randn(maxT * C, seed(4));
    std::vector<float> out(B * T * C);
    encoder_forward(H(out, {B, T, C}), H(inp, {B, T}, DType::kI32), H(wte, {V, C}), H(wpe, {maxT, C}));
    Dev dout_({B, T, C}), dinp = D(inp, {B, T}, DType::kI32), dwte = D(wte, {V, C}), dwpe = D(wpe, {maxT, C});
    dout_.poison();
    encoder_forward(dout_.t(), dinp.t(), dwte.t(), dwpe.t());
    expect_close("encoder_forward out", dout_.download<float>(), out, kTolElementwise);

    auto g = randn(B * T * C, seed(5));
    auto gwte = randn(V * C, seed(6)), gwpe = randn(maxT * C, seed(7));  // += targets start non-zero
    Dev dg = D(g, {B, T, C}), dgwte = D(gwte, {V, C}), dgwpe = D(gwpe, {maxT, C});
    encoder_backward(H(gwte, {V, C}), H(gwpe, {maxT, C}), H(g, {B, T, C}), H(inp, {B, T}, DType::kI32));
    encoder_backward(dgwte.t(), dgwpe.t(), dg.t(), dinp.t());
    expect_close("encoder_backward dwte (+=)", dgwte.download<float>(), gwte, kTolReduce);
    expect_close("encoder_backward dwpe (+=)", dgwpe.download<float>(), gwpe, kTolReduce);
}

TEST_F(CudaOps, LayerNorm) {
    const int B = 2, T = 41, C = 200;
    auto x = randn(B * T * C, seed(10), 2.0f), w = randn(C, seed(11)), b = randn(C, seed(12));
    for (size_t i = 0; i < x.size(); i++) x[i] += 0.5f;  // a non-zero mean
    std::vector<float> out(B * T * C), mean(B * T), rstd(B * T);
    layernorm_forward(H(out, {B, T, C}), H(mean, {B, T}), H(rstd, {B, T}), H(x, {B, T, C}), H(w, {C}), H(b, {C}), kLnEps);
    Dev dx = D(x, {B, T, C}), dw = D(w, {C}), db = D(b, {C}), dout({B, T, C}), dmean({B, T}), drstd({B, T});
    dout.poison();
    dmean.poison();
    drstd.poison();
    layernorm_forward(dout.t(), dmean.t(), drstd.t(), dx.t(), dw.t(), db.t(), kLnEps);
    expect_close("layernorm_forward out", dout.download<float>(), out, kTolReduce);
    expect_close("layernorm_forward mean", dmean.download<float>(), mean, kTolReduce);
    expect_close("layernorm_forward rstd", drstd.download<float>(), rstd, kTolReduce);

    auto g = randn(B * T * C, seed(13));
    auto gi = randn(B * T * C, seed(14)), gw = randn(C, seed(15)), gb = randn(C, seed(16));
    Dev dg = D(g, {B, T, C}), dgi = D(gi, {B, T, C}), dgw = D(gw, {C}), dgb = D(gb, {C});
    layernorm_backward(H(gi, {B, T, C}), H(gw, {C}), H(gb, {C}), H(g, {B, T, C}), H(x, {B, T, C}), H(w, {C}),
                       H(mean, {B, T}), H(rstd, {B, T}));
    layernorm_backward(dgi.t(), dgw.t(), dgb.t(), dg.t(), dx.t(), dw.t(), dmean.t(), drstd.t());
    expect_close("layernorm_backward dinp (+=)", dgi.download<float>(), gi, kTolBackward);
    expect_close("layernorm_backward dweight (+=)", dgw.download<float>(), gw, kTolBackward);
    expect_close("layernorm_backward dbias (+=)", dgb.download<float>(), gb, kTolBackward);
}

// tol_floor: the least tolerance to apply (TF32 needs a looser one than fp32's).
void matmul_case(const char* tag, int BT, int C, int OC, bool with_bias, uint32_t s, double tol_floor = 0.0) {
    const double tol_fwd = std::max(kTolReduce, tol_floor), tol_bwd = std::max(kTolBackward, tol_floor);
    auto x = randn(BT * C, seed(s)), w = randn(OC * C, seed(s + 1), 0.1f), b = randn(OC, seed(s + 2));
    std::vector<float> out(BT * OC);
    Tensor hb = with_bias ? H(b, {OC}) : Tensor();
    matmul_forward(H(out, {BT, OC}), H(x, {BT, C}), H(w, {OC, C}), hb);
    Dev dx = D(x, {BT, C}), dw = D(w, {OC, C}), db = D(b, {OC}), dout({BT, OC});
    dout.poison();
    matmul_forward(dout.t(), dx.t(), dw.t(), with_bias ? db.t() : Tensor());
    expect_close((std::string("matmul_forward out ") + tag).c_str(), dout.download<float>(), out, tol_fwd);

    auto g = randn(BT * OC, seed(s + 3)), gw = randn(OC * C, seed(s + 4)), gb = randn(OC, seed(s + 5));
    std::vector<float> gi(BT * C);
    Dev dg = D(g, {BT, OC}), dgi({BT, C}), dgw = D(gw, {OC, C}), dgb = D(gb, {OC});
    dgi.poison();
    matmul_backward(H(gi, {BT, C}), H(gw, {OC, C}), with_bias ? H(gb, {OC}) : Tensor(), H(g, {BT, OC}),
                    H(x, {BT, C}), H(w, {OC, C}));
    matmul_backward(dgi.t(), dgw.t(), with_bias ? dgb.t() : Tensor(), dg.t(), dx.t(), dw.t());
    expect_close((std::string("matmul_backward dinp ") + tag).c_str(), dgi.download<float>(), gi, tol_fwd);
    // dweight sums over BT rows; fp32 order differences over BT terms.
    expect_close((std::string("matmul_backward dweight (+=) ") + tag).c_str(), dgw.download<float>(), gw,
                 tol_bwd);
    if (with_bias)
        expect_close((std::string("matmul_backward dbias (+=) ") + tag).c_str(), dgb.download<float>(), gb,
                     tol_bwd);
}

TEST_F(CudaOps, Matmul) {
    matmul_case("(74x96 -> 200, bias)", 74, 96, 200, true, 20);
    matmul_case("(300x64 -> 33, no bias)", 300, 64, 33, false, 30);
}

// The CUDA knobs of the fp32 GEMM path (core/knobs.h), each in this process through ScopedKnob.
// LLMTRAIN_CUDA_TF32=1 rounds the inputs to TF32 (10 mantissa bits: 2^-11 relative each) before the fp32
// accumulation, so products carry ~1e-3 relative error => 1e-2 of the output's max; a wrong or unwritten
// output is off by O(1). LLMTRAIN_CUBLASLT_TUNE=0 (the heuristic's first pick) and LLMTRAIN_CUDA_SYNC=1
// (a synchronise after each launch) change no arithmetic: fp32 tolerances.
TEST_F(CudaOps, MatmulKnobs) {
    {
        const ScopedKnob tf32(Knob::kCudaTf32, "1");
        matmul_case("(tf32, 74x96 -> 200, bias)", 74, 96, 200, true, 20, 1e-2);
    }
    {
        const ScopedKnob untuned(Knob::kCublasLtTune, "0");
        matmul_case("(untuned, 74x96 -> 200, bias)", 74, 96, 200, true, 20);
    }
    const ScopedKnob sync(Knob::kCudaSync, "1");
    matmul_case("(sync, 300x64 -> 33, no bias)", 300, 64, 33, false, 30);
}

// KV < NH: grouped-query attention (qkv rows C + 2*KV*HS wide; the dk/dv of a kv head sum its query heads).
void attention_case(const char* tag, int B, int T, int C, int NH, int KV, uint32_t s) {
    const int C3 = C + 2 * KV * (C / NH);
    auto qkv = randn(B * T * C3, seed(s));
    std::vector<float> out(B * T * C), lse(B * NH * T);
    attention_forward(H(out, {B, T, C}), H(lse, {B, NH, T}), H(qkv, {B, T, C3}), NH, KV);
    Dev dqkv = D(qkv, {B, T, C3}), dout({B, T, C}), dlse({B, NH, T});
    dout.poison();
    dlse.poison();
    attention_forward(dout.t(), dlse.t(), dqkv.t(), NH, KV);
    expect_close((std::string("attention_forward out ") + tag).c_str(), dout.download<float>(), out, kTolReduce);
    expect_close((std::string("attention_forward lse ") + tag).c_str(), dlse.download<float>(), lse, kTolReduce);

    auto g = randn(B * T * C, seed(s + 1));
    std::vector<float> gq(B * T * C3);
    Dev dg = D(g, {B, T, C}), dgq({B, T, C3});
    dgq.poison();
    attention_backward(H(gq, {B, T, C3}), H(g, {B, T, C}), H(qkv, {B, T, C3}), H(out, {B, T, C}),
                       H(lse, {B, NH, T}), NH, KV);
    attention_backward(dgq.t(), dg.t(), dqkv.t(), dout.t(), dlse.t(), NH, KV);
    expect_close((std::string("attention_backward dqkv ") + tag).c_str(), dgq.download<float>(), gq, kTolBackward);

    // KV-cache rows t0.. of a cache of T positions.
    const int t0 = T / 3, Tq = T - t0;
    std::vector<float> oc(B * Tq * C);
    attention_forward_cached(H(oc, {B, Tq, C}), H(qkv, {B, T, C3}), t0, NH, KV);
    Dev doc({B, Tq, C});
    doc.poison();
    attention_forward_cached(doc.t(), dqkv.t(), t0, NH, KV);
    expect_close((std::string("attention_forward_cached out ") + tag).c_str(), doc.download<float>(), oc,
                 kTolReduce);
}

TEST_F(CudaOps, Attention) {
    attention_case("(HS 64, T 67)", 2, 67, 192, 3, 3, 40);
    attention_case("(HS 20, T 33)", 3, 33, 40, 2, 2, 50);
    attention_case("(HS 128, T 130)", 1, 130, 256, 2, 2, 60);
    // Grouped-query: 4 query heads on 2 kv heads, multi-query (1 kv head), Llama-3.2-1B's 32 on 8.
    attention_case("(GQA 4/2, HS 64, T 67)", 2, 67, 256, 4, 2, 42);
    attention_case("(MQA 4/1, HS 20, T 33)", 3, 33, 80, 4, 1, 52);
    attention_case("(GQA 8/2, HS 128, T 130)", 1, 130, 1024, 8, 2, 62);
    attention_case("(GQA 32/8, HS 64, T 97)", 1, 97, 2048, 32, 8, 64);
}

// Packed examples (positions restarting at 0 per example): the fp32 simple kernels against the CPU op with
// the same positions. Rows mix one-token examples, examples crossing the 32-key warp chunks and a row that is
// one example; tolerances as above (the same sums over fewer keys).
void packed_attention_case(const char* tag, const std::vector<std::vector<int>>& lengths, int T, int C, int NH, int KV,
                           uint32_t s) {
    const test::Packing pk = test::pack_rows(lengths, T);
    const int B = pk.B, C3 = C + 2 * KV * (C / NH);
    auto pos = pk.positions;
    auto qkv = randn(B * T * C3, seed(s)), g = randn(B * T * C, seed(s + 1));
    std::vector<float> out(B * T * C), lse(B * NH * T), gq(B * T * C3);
    const Tensor P = H(pos, {B, T}, DType::kI32);
    attention_forward(H(out, {B, T, C}), H(lse, {B, NH, T}), H(qkv, {B, T, C3}), NH, KV, P);
    attention_backward(H(gq, {B, T, C3}), H(g, {B, T, C}), H(qkv, {B, T, C3}), H(out, {B, T, C}), H(lse, {B, NH, T}),
                       NH, KV, {}, P);
    Dev dpos = D(pos, {B, T}, DType::kI32), dqkv = D(qkv, {B, T, C3}), dout({B, T, C}), dlse({B, NH, T});
    Dev dg = D(g, {B, T, C}), dgq({B, T, C3});
    dout.poison();
    dlse.poison();
    dgq.poison();
    attention_forward(dout.t(), dlse.t(), dqkv.t(), NH, KV, dpos.t());
    attention_backward(dgq.t(), dg.t(), dqkv.t(), dout.t(), dlse.t(), NH, KV, {}, dpos.t());
    const std::string p = std::string(" packed ") + tag;
    expect_close(("attention_forward out" + p).c_str(), dout.download<float>(), out, kTolReduce);
    expect_close(("attention_forward lse" + p).c_str(), dlse.download<float>(), lse, kTolReduce);
    expect_close(("attention_backward dqkv" + p).c_str(), dgq.download<float>(), gq, kTolBackward);
}

TEST_F(CudaOps, PackedAttention) {
    const std::vector<std::vector<int>> mix = {{1, 40, 1, 1, 33, 24}, {100}, {60, 39, 1}};
    packed_attention_case("(HS 64, T 100)", mix, 100, 192, 3, 3, 70);
    packed_attention_case("(GQA 4/2, HS 64, T 100)", mix, 100, 256, 4, 2, 72);
    packed_attention_case("(MQA 4/1, HS 20, T 100)", mix, 100, 80, 4, 1, 74);
    packed_attention_case("(GQA 8/2, HS 128, T 70)", {std::vector<int>(70, 1), {35, 35}}, 70, 1024, 8, 2, 76);
}

// RMSNorm, its residual-fused forward, SwiGLU and RoPE (the LLaMA ops), fp32 against the CPU ops. Widths take
// each kernel: RMSNorm C = 67 (not a multiple of 4 floats: the scalar forward, the backward's one-element
// groups), 200 and 768 (16-byte groups), 2048 (Llama-3.2-1B: the forward in registers, the backward's 512-thread
// block); RmsNormBackwardShapes below covers the backward's other paths; SwiGLU F = 100 (16-byte
// chunks) and 37 (one element per thread); RoPE HS = 64 (4 pairs per thread) and 20 (half = 10: one pair).
// Tolerances as above: RMSNorm reduces over C (kTolReduce, backward kTolBackward); SwiGLU and RoPE are
// element-wise up to expf vs libm exp and the order of two products (kTolElementwise).
TEST_F(CudaOps, RmsNorm) {
    for (const int C : {67, 200, 768, 2048}) {
        const int B = 2, T = 41;
        const std::string c = " C=" + std::to_string(C);
        auto x = randn(B * T * C, seed(200 + C), 2.0f), w = randn(C, seed(201 + C));
        std::vector<float> out(B * T * C), rstd(B * T);
        rmsnorm_forward(H(out, {B, T, C}), H(rstd, {B, T}), H(x, {B, T, C}), H(w, {C}), kLnEps);
        Dev dx = D(x, {B, T, C}), dw = D(w, {C}), dout({B, T, C}), drstd({B, T});
        dout.poison();
        drstd.poison();
        rmsnorm_forward(dout.t(), drstd.t(), dx.t(), dw.t(), kLnEps);
        expect_close(("rmsnorm_forward out" + c).c_str(), dout.download<float>(), out, kTolReduce);
        expect_close(("rmsnorm_forward rstd" + c).c_str(), drstd.download<float>(), rstd, kTolReduce);

        auto g = randn(B * T * C, seed(202 + C)), gi = randn(B * T * C, seed(203 + C)), gw = randn(C, seed(204 + C));
        Dev dg = D(g, {B, T, C}), dgi = D(gi, {B, T, C}), dgw = D(gw, {C});
        rmsnorm_backward(H(gi, {B, T, C}), H(gw, {C}), H(g, {B, T, C}), H(x, {B, T, C}), H(w, {C}), H(rstd, {B, T}));
        rmsnorm_backward(dgi.t(), dgw.t(), dg.t(), dx.t(), dw.t(), drstd.t());
        expect_close(("rmsnorm_backward dinp (+=)" + c).c_str(), dgi.download<float>(), gi, kTolBackward);
        expect_close(("rmsnorm_backward dweight (+=)" + c).c_str(), dgw.download<float>(), gw, kTolBackward);

        // residual_out = x + y, normalised; then in place on the first input (residual_out aliasing inp1).
        auto y = randn(B * T * C, seed(205 + C));
        std::vector<float> h(B * T * C), o2(B * T * C), r2(B * T);
        residual_rmsnorm_forward(H(h, {B, T, C}), H(o2, {B, T, C}), H(r2, {B, T}), H(x, {B, T, C}), H(y, {B, T, C}),
                                 H(w, {C}), kLnEps);
        Dev dy = D(y, {B, T, C}), dh({B, T, C});
        dh.poison();
        dout.poison();
        drstd.poison();
        residual_rmsnorm_forward(dh.t(), dout.t(), drstd.t(), dx.t(), dy.t(), dw.t(), kLnEps);
        expect_close(("residual_rmsnorm_forward residual" + c).c_str(), dh.download<float>(), h, kTolElementwise);
        expect_close(("residual_rmsnorm_forward out" + c).c_str(), dout.download<float>(), o2, kTolReduce);
        expect_close(("residual_rmsnorm_forward rstd" + c).c_str(), drstd.download<float>(), r2, kTolReduce);
        dout.poison();
        residual_rmsnorm_forward(dx.t(), dout.t(), drstd.t(), dx.t(), dy.t(), dw.t(), kLnEps);
        expect_close(("residual_rmsnorm_forward in place" + c).c_str(), dx.download<float>(), h, kTolElementwise);
        expect_close(("residual_rmsnorm_forward out, in place" + c).c_str(), dout.download<float>(), o2, kTolReduce);
    }
}

// rmsnorm_backward's paths (cuda/rmsnorm.cu): one row across a block with 1, 2 or 4 groups per thread, groups of 4
// floats (C % 4 == 0) or of one element, blocks whose last warp is partly idle (C = 999: one-element groups, 2 per
// thread of 512); row counts of 1, a few, and thousands (many steps per block; 4101 is no multiple of the 4 rows a
// step takes); and C = 2051, wider than a block holds (the scalar kernel with atomics). Each case runs twice from
// the same dinp/dweight: the block-partial paths must give the same bits (deterministic dweight), and both runs must
// match the CPU op (kTolBackward, as above: sums over up to 8192 columns and 4101 rows in another order).
TEST_F(CudaOps, RmsNormBackwardShapes) {
    struct Case {
        int B, T, C;
        bool deterministic;
    };
    for (const Case k : {Case{2, 41, 999, true}, Case{1, 5, 1999, true}, Case{2, 41, 2051, false},
                         Case{1, 1, 2048, true}, Case{3, 1367, 2048, true}, Case{1, 37, 4000, true},
                         Case{2, 9, 8192, true}, Case{1, 3, 67, true}}) {
        const int B = k.B, T = k.T, C = k.C;
        const std::string c = " B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C);
        auto x = randn(B * T * C, seed(230 + C + T), 2.0f), w = randn(C, seed(231 + C + T));
        auto g = randn(B * T * C, seed(232 + C + T)), gi = randn(B * T * C, seed(233 + C + T));
        auto gw = randn(C, seed(234 + C + T));
        std::vector<float> out(B * T * C), rstd(B * T);
        rmsnorm_forward(H(out, {B, T, C}), H(rstd, {B, T}), H(x, {B, T, C}), H(w, {C}), kLnEps);
        Dev dx = D(x, {B, T, C}), dw = D(w, {C}), dg = D(g, {B, T, C}), dr = D(rstd, {B, T});
        std::vector<float> runs_dinp[2], runs_dw[2];
        for (int run = 0; run < 2; run++) {
            Dev dgi = D(gi, {B, T, C}), dgw = D(gw, {C});
            rmsnorm_backward(dgi.t(), dgw.t(), dg.t(), dx.t(), dw.t(), dr.t());
            runs_dinp[run] = dgi.download<float>();
            runs_dw[run] = dgw.download<float>();
        }
        rmsnorm_backward(H(gi, {B, T, C}), H(gw, {C}), H(g, {B, T, C}), H(x, {B, T, C}), H(w, {C}), H(rstd, {B, T}));
        for (int run = 0; run < 2; run++) {
            const std::string r = c + (run ? " (run 2)" : "");
            expect_close(("rmsnorm_backward dinp (+=)" + r).c_str(), runs_dinp[run], gi, kTolBackward);
            expect_close(("rmsnorm_backward dweight (+=)" + r).c_str(), runs_dw[run], gw, kTolBackward);
        }
        // EXPECT_TRUE, not EXPECT_EQ: a failure must not print millions of elements.
        EXPECT_TRUE(runs_dinp[0] == runs_dinp[1]) << "dinp differs between two runs" << c;
        if (k.deterministic) {
            EXPECT_TRUE(runs_dw[0] == runs_dw[1]) << "dweight differs between two runs" << c;
        }
    }
}

TEST_F(CudaOps, SwiGluRope) {
    for (const int F : {100, 37}) {
        const int N = 2 * 33;
        const std::string f = " F=" + std::to_string(F);
        auto x = randn(N * 2 * F, seed(300 + F), 3.0f), g = randn(N * F, seed(301 + F));
        std::vector<float> out(N * F), dx(N * 2 * F);
        swiglu_forward(H(out, {N, F}), H(x, {N, 2 * F}));
        swiglu_backward(H(dx, {N, 2 * F}), H(g, {N, F}), H(x, {N, 2 * F}));
        Dev ddx = D(x, {N, 2 * F}), dg = D(g, {N, F}), dout({N, F}), dgx({N, 2 * F});
        dout.poison();
        dgx.poison();
        swiglu_forward(dout.t(), ddx.t());
        swiglu_backward(dgx.t(), dg.t(), ddx.t());
        expect_close(("swiglu_forward" + f).c_str(), dout.download<float>(), out, kTolElementwise);
        expect_close(("swiglu_backward" + f).c_str(), dgx.download<float>(), dx, kTolElementwise);
        swiglu_backward(ddx.t(), dg.t(), ddx.t());  // dinp aliasing inp
        expect_close(("swiglu_backward in place" + f).c_str(), ddx.download<float>(), dx, kTolElementwise);
    }
    for (const int HS : {64, 20}) {
        const int B = 2, T = 37, NH = 4, KV = 2, C3 = (NH + 2 * KV) * HS, pos0 = 11, Tmax = T + pos0 + 5;
        const std::string h = " HS=" + std::to_string(HS);
        std::vector<float> table(Tmax * HS);
        for (int p = 0; p < Tmax; p++)
            for (int i = 0; i < HS / 2; i++) {
                const double a = p * std::pow(10000.0, -2.0 * i / HS);
                table[p * HS + i] = static_cast<float>(std::cos(a));
                table[p * HS + HS / 2 + i] = static_cast<float>(std::sin(a));
            }
        auto x = randn(B * T * C3, seed(310 + HS)), g = randn(B * T * C3, seed(311 + HS));
        Dev dx = D(x, {B, T, C3}), dg = D(g, {B, T, C3}), dt = D(table, {Tmax, HS});
        rope_forward(H(x, {B, T, C3}), H(table, {Tmax, HS}), NH, KV, pos0);
        rope_forward(dx.t(), dt.t(), NH, KV, pos0);
        expect_close(("rope_forward (pos0 11)" + h).c_str(), dx.download<float>(), x, kTolElementwise);
        rope_backward(H(g, {B, T, C3}), H(table, {Tmax, HS}), NH, KV);
        rope_backward(dg.t(), dt.t(), NH, KV);
        expect_close(("rope_backward" + h).c_str(), dg.download<float>(), g, kTolElementwise);
        // Packed examples: table row positions[b,t] per row.
        auto pos = test::pack_rows({{1, 20, 16}, {37}}, T).positions;
        Dev dpos = D(pos, {B, T}, DType::kI32);
        rope_forward(H(x, {B, T, C3}), H(table, {Tmax, HS}), NH, KV, 0, H(pos, {B, T}, DType::kI32));
        rope_forward(dx.t(), dt.t(), NH, KV, 0, dpos.t());
        expect_close(("rope_forward (packed)" + h).c_str(), dx.download<float>(), x, kTolElementwise);
        rope_backward(H(g, {B, T, C3}), H(table, {Tmax, HS}), NH, KV, H(pos, {B, T}, DType::kI32));
        rope_backward(dg.t(), dt.t(), NH, KV, dpos.t());
        expect_close(("rope_backward (packed)" + h).c_str(), dg.download<float>(), g, kTolElementwise);
    }
}

TEST_F(CudaOps, GeluResidualDropoutScale) {
    const int N = 100003;  // not a multiple of any block size
    auto x = randn(N, seed(70), 3.0f), y = randn(N, seed(71)), g = randn(N, seed(72));
    std::vector<float> out(N);
    Dev dx = D(x, {N}), dy = D(y, {N}), dg = D(g, {N}), dout({N});

    gelu_forward(H(out, {N}), H(x, {N}));
    dout.poison();
    gelu_forward(dout.t(), dx.t());
    expect_close("gelu_forward", dout.download<float>(), out, kTolElementwise);
    gelu_backward(H(out, {N}), H(x, {N}), H(g, {N}));
    dout.poison();
    gelu_backward(dout.t(), dx.t(), dg.t());
    expect_close("gelu_backward", dout.download<float>(), out, kTolElementwise);

    residual_forward(H(out, {N}), H(x, {N}), H(y, {N}));
    dout.poison();
    residual_forward(dout.t(), dx.t(), dy.t());
    expect_close("residual_forward", dout.download<float>(), out, kTolElementwise);
    auto a1 = randn(N, seed(73)), a2 = randn(N, seed(74));
    Dev da1 = D(a1, {N}), da2 = D(a2, {N});
    residual_backward(H(a1, {N}), H(a2, {N}), H(g, {N}));
    residual_backward(da1.t(), da2.t(), dg.t());
    expect_close("residual_backward dinp1 (+=)", da1.download<float>(), a1, kTolElementwise);
    expect_close("residual_backward dinp2 (+=)", da2.download<float>(), a2, kTolElementwise);

    const uint64_t dseed = 0x1234567ull + seed(75);
    dropout_forward(H(out, {N}), H(x, {N}), 0.1f, dseed);
    dout.poison();
    dropout_forward(dout.t(), dx.t(), 0.1f, dseed);
    auto got = dout.download<float>();
    size_t mask_diff = 0;
    for (int i = 0; i < N; i++) mask_diff += (got[i] == 0.0f) != (out[i] == 0.0f);
    EXPECT_EQ(mask_diff, 0u) << "dropout masks differ between CPU and CUDA";
    expect_close("dropout_forward (same mask)", got, out, kTolElementwise);
    dropout_backward(H(out, {N}), H(g, {N}), 0.1f, dseed);
    dout.poison();
    dropout_backward(dout.t(), dg.t(), 0.1f, dseed);
    expect_close("dropout_backward (same mask)", dout.download<float>(), out, kTolElementwise);

    scale_inplace(H(x, {N}), 0.37f);
    scale_inplace(dx.t(), 0.37f);
    expect_close("scale_inplace", dx.download<float>(), x, kTolElementwise);
    // Both accumulate in fp64: only the order of the additions differs.
    const double cs = sum_squares(H(y, {N})), gs = sum_squares(dy.t());
    std::printf("[cuda-vs-cpu] %-44s rel err %.3e (tol 1e-12)\n", "sum_squares", std::fabs(gs - cs) / cs);
    EXPECT_LE(std::fabs(gs - cs) / cs, 1e-12);
}

TEST_F(CudaOps, Classifier) {
    const int B = 3, T = 19, V = 1000, Vp = 1024;
    auto logits = randn(B * T * Vp, seed(80), 3.0f);
    auto tgt = randint(B * T, V, seed(81));
    tgt[5] = -1;  // ignored positions
    tgt[40] = -1;
    std::vector<float> losses(B * T);
    Dev dl = D(logits, {B, T, Vp}), dt = D(tgt, {B, T}, DType::kI32), dlosses({B, T});
    classifier_forward(H(losses, {B, T}), H(logits, {B, T, Vp}), H(tgt, {B, T}, DType::kI32), V);
    dlosses.poison();
    classifier_forward(dlosses.t(), dl.t(), dt.t(), V);
    expect_close("classifier_forward losses", dlosses.download<float>(), losses, kTolReduce);

    std::vector<float> probs(B * T * Vp);
    Dev dprobs({B, T, Vp});
    dprobs.poison();
    softmax_forward(H(probs, {B, T, Vp}), H(logits, {B, T, Vp}), V);
    softmax_forward(dprobs.t(), dl.t(), V);
    expect_close("softmax_forward probs", dprobs.download<float>(), probs, kTolReduce);

    const float scale = 1.0f / (B * T - 2);
    classifier_forward_backward(H(losses, {B, T}), H(logits, {B, T, Vp}), H(tgt, {B, T}, DType::kI32), scale, V);
    dlosses.poison();
    classifier_forward_backward(dlosses.t(), dl.t(), dt.t(), scale, V);
    expect_close("classifier_forward_backward losses", dlosses.download<float>(), losses, kTolReduce);
    expect_close("classifier_forward_backward dlogits", dl.download<float>(), logits, kTolReduce);
}

TEST_F(CudaOps, AdamW) {
    const int N = 70001;
    auto p = randn(N, seed(90)), m = randn(N, seed(91), 0.1f), g = randn(N, seed(92));
    auto v = randn(N, seed(93), 0.1f);
    for (auto& x : v) x = x * x;  // second moments are non-negative
    Dev dp = D(p, {N}), dm = D(m, {N}), dv = D(v, {N}), dg = D(g, {N});
    AdamWParams hp;
    hp.lr = 3e-4f;
    hp.beta2 = 0.95f;
    hp.weight_decay = 0.1f;
    hp.grad_scale = 0.7f;
    hp.step = 7;
    for (int step = 0; step < 3; step++, hp.step++) {
        adamw_update(H(p, {N}), H(m, {N}), H(v, {N}), H(g, {N}), hp);
        adamw_update(dp.t(), dm.t(), dv.t(), dg.t(), hp);
    }
    expect_close("adamw_update params (3 steps)", dp.download<float>(), p, kTolElementwise);
    expect_close("adamw_update m", dm.download<float>(), m, kTolElementwise);
    expect_close("adamw_update v", dv.download<float>(), v, kTolElementwise);
}

// sgd_update_runs (cpu/sgd.h) over three runs with a gap, 3 steps (the first sets the buffer), with the
// bf16 compute copy rewritten in the same pass: momentum, Nesterov, dampening and plain SGD (no buffer).
TEST_F(CudaOps, Sgd) {
    const int N = 70001;
    const std::vector<AdamWRun> runs = {{0, 30000, true}, {30000, 30011, false}, {30020, N, true}};
    struct Case {
        const char* name;
        float momentum, dampening;
        bool nesterov;
    };
    for (const Case& c : {Case{"momentum", 0.9f, 0.0f, false}, Case{"nesterov", 0.9f, 0.0f, true},
                          Case{"dampening", 0.8f, 0.3f, false}, Case{"plain", 0.0f, 0.0f, false}}) {
        auto p = randn(N, seed(95)), g = randn(N, seed(96));
        const std::vector<float> p0 = p;
        std::vector<float> buf(N, 0.0f);
        const bool has_buf = c.momentum != 0.0f;
        Dev dp = D(p, {N}), dbuf = D(buf, {N}), dg = D(g, {N});
        Dev dlp({N}, DType::kBF16);
        SgdParams hp;
        hp.lr = 0.05f;
        hp.momentum = c.momentum;
        hp.dampening = c.dampening;
        hp.nesterov = c.nesterov;
        hp.weight_decay = 0.1f;
        hp.grad_scale = 0.7f;
        for (int step = 0; step < 3; step++) {
            hp.first_step = step == 0;
            sgd_update_runs(H(p, {N}), has_buf ? H(buf, {N}) : Tensor(), H(g, {N}), hp, runs);
            sgd_update_runs(dp.t(), has_buf ? dbuf.t() : Tensor(), dg.t(), hp, runs, dlp.t());
        }
        const std::vector<float> got = dp.download<float>();
        expect_close((std::string("sgd_update_runs params, ") + c.name).c_str(), got, p, kTolElementwise);
        if (has_buf) {
            expect_close((std::string("sgd_update_runs buf, ") + c.name).c_str(), dbuf.download<float>(), buf,
                         kTolElementwise);
        }
        // The compute copy is the rounded fp32 result inside the runs (the gap's elements were never written).
        const std::vector<uint16_t> lp = dlp.download<uint16_t>();
        for (size_t i = 0; i < static_cast<size_t>(N); i += 997)
            if (i < 30011 || i >= 30020) {
                EXPECT_EQ(lp[i], bf16_from_float(got[i])) << i;
            }
        // The gap between the runs is untouched.
        for (size_t i = 30011; i < 30020; i++) EXPECT_EQ(got[i], p0[i]) << i;
    }
}

}  // namespace
}  // namespace llmt::kernels
