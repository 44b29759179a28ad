// The LLaMA ops of the case table (case_table.h): RMSNorm (and the residual add fused in front of it), SwiGLU and
// RoPE, each with its float64 reference (ref_ops.h) where one exists.
#include <vector>

#include "kernels/case_args.h"
#include "kernels/ops.h"
#include "kernels/ref_ops.h"

namespace llmt::kernels::cases {
namespace {

// What the RMSNorm cases share: their (B, T, C) and eps (the call's one parameter), the normalised output and its
// rstd, and the float64 forward of a row buffer into them.
struct NormCase {
    int B, T, C;
    float eps;
    explicit NormCase(const Case& c) : B(c.d.B), T(c.d.T), C(c.d.C), eps(static_cast<float>(c.d.eps)) {}
    Call call() const {
        Call k;
        k.params = {{"eps", eps}};
        return k;
    }
    Shape btc() const { return {B, T, C}; }
    size_t numel() const { return static_cast<size_t>(B) * T * C; }
    Arg out() const { return output("out", btc(), {kTolReduce, kTolOut}); }
    Arg rstd() const { return output("rstd", {B, T}, {kTolReduce, kTolStat}, Kind::kF32); }
    void ref_forward(Ref64& r, const char* x) const {
        ref::rmsnorm_forward(r("out"), r("rstd"), r(x), r("weight"), double{eps}, B * T, C);
    }
};

// RMSNorm forward, then backward from its rstd (dinp, dweight: +=).
Call rmsnorm(const Case& c) {
    const NormCase n(c);
    const Shape btc = n.btc();
    Call k = n.call();
    k.args = {input("inp", btc, 2.0f),
              input("weight", {n.C}),
              n.out(),
              n.rstd(),
              input("dout", btc),
              inout("dinp", btc, {kTolBackward, kTolGrad}),
              inout("dweight", {n.C}, {kTolBackward, kTolGrad}, Kind::kF32)};
    k.stages = {[=](Run& r) {
        rmsnorm_forward(r["out"], r["rstd"], r["inp"], r["weight"], n.eps);
        rmsnorm_backward(r["dinp"], r["dweight"], r["dout"], r["inp"], r["weight"], r["rstd"]);
    }};
    k.f64 = [=](Ref64& r) {
        n.ref_forward(r, "inp");
        std::vector<double> dx(n.numel()), dw(static_cast<size_t>(n.C));
        ref::rmsnorm_backward(dx.data(), dw.data(), r("dout"), r("inp"), r("weight"), double{n.eps}, n.B * n.T, n.C);
        add_into(r("dinp"), dx);
        add_into(r("dweight"), dw);
    };
    return k;
}

// residual_out = inp1 + inp2 (bf16: rounded once, bit for bit the CPU sum rounded), normalised from the stored sum.
// The CPU reference of a bf16 run normalises the rounded sum, as the kernel does.
Call residual_rmsnorm(const Case& c) {
    const NormCase n(c);
    Call k = n.call();
    k.args = {input("inp1", n.btc(), 2.0f),
              input("inp2", n.btc()),
              input("weight", {n.C}),
              output("residual", n.btc(), {kTolElementwise, kExactRounded}),
              n.out(),
              n.rstd()};
    k.stages = {[=](Run& r) {
        residual_rmsnorm_forward(r["residual"], r["out"], r["rstd"], r["inp1"], r["inp2"], r["weight"], n.eps);
        if (!r.cuda()) {
            r.round_as_stored("residual");
            rmsnorm_forward(r["out"], r["rstd"], r["residual"], r["weight"], n.eps);
        }
    }};
    k.f64 = [=](Ref64& r) {
        for (size_t i = 0; i < n.numel(); i++) r("residual")[i] = r("inp1")[i] + r("inp2")[i];
        n.ref_forward(r, "residual");
    };
    return k;
}

// The same with residual_out aliasing inp1 (in place: the model's residual stream).
Call residual_rmsnorm_inplace(const Case& c) {
    const NormCase n(c);
    Call k = n.call();
    k.args = {inout("inp1", n.btc(), {kTolElementwise, kExactRounded}, Kind::kAct, 2.0f), input("inp2", n.btc()),
              input("weight", {n.C}), n.out(), n.rstd()};
    k.stages = {[=](Run& r) {
        residual_rmsnorm_forward(r["inp1"], r["out"], r["rstd"], r["inp1"], r["inp2"], r["weight"], n.eps);
    }};
    k.f64 = [=](Ref64& r) {
        for (size_t i = 0; i < n.numel(); i++) r("inp1")[i] += r("inp2")[i];
        n.ref_forward(r, "inp1");
    };
    return k;
}

// out = silu(gate) * up over rows [gate | up] of width 2F; the backward writes [dgate | dup].
Call swiglu(const Case& c) {
    const int N = c.d.N, F = c.d.F;
    Call k;
    k.args = {input("inp", {N, 2 * F}, 3.0f), input("dout", {N, F}), output("out", {N, F}, {kTolElementwise, kTolOut}),
              output("dinp", {N, 2 * F}, {kTolElementwise, kTolOut})};
    k.stages = {[](Run& r) {
        swiglu_forward(r["out"], r["inp"]);
        swiglu_backward(r["dinp"], r["dout"], r["inp"]);
    }};
    k.f64 = [=](Ref64& r) {
        ref::swiglu_forward(r("out"), r("inp"), N, F);
        ref::swiglu_backward(r("dinp"), r("dout"), r("inp"), N, F);
    };
    return k;
}

// The backward with dinp aliasing inp (each element pair read before it is written).
Call swiglu_inplace(const Case& c) {
    const int N = c.d.N, F = c.d.F;
    Call k;
    k.args = {inout("inp", {N, 2 * F}, {kTolElementwise, kTolOut}, Kind::kAct, 3.0f), input("dout", {N, F})};
    k.stages = {[](Run& r) { swiglu_backward(r["inp"], r["dout"], r["inp"]); }};
    k.f64 = [=](Ref64& r) {
        std::vector<double> dx(static_cast<size_t>(N) * 2 * F);
        ref::swiglu_backward(dx.data(), r("dout"), r("inp"), N, F);
        std::copy(dx.begin(), dx.end(), r("inp"));
    };
    return k;
}

// RoPE on the NH query and KV key heads of qkv rows, in place: forward at positions pos0.. (or a packed row's
// positions), and the backward (positions 0.., or the packed ones) on a gradient. The table: rows [cos | sin] of a_i =
// pos * theta^(-2i/HS), fp32.
Call rope(const Case& c) {
    const int B = batch_rows(c), T = c.d.T, NH = c.d.NH, KV = c.d.KV ? c.d.KV : c.d.NH, HS = c.d.C / NH;
    const int C3 = (NH + 2 * KV) * HS, pos0 = c.d.pos0, maxT = c.d.maxT;
    const bool packed = !c.packing.empty();
    Call k;
    k.args = {inout("qkv", {B, T, C3}, {kTolElementwise, kTolOut}),
              inout("dqkv", {B, T, C3}, {kTolElementwise, kTolOut}),
              table("table", {maxT, HS}, ref::rope_table(maxT, HS, c.d.theta))};
    if (packed) {
        Arg p = ids("positions", {B, T}, 1);
        p.ids = packed_positions(c);
        k.args.push_back(p);
    }
    k.stages = {[=](Run& r) {
        const Tensor P = packed ? r["positions"] : Tensor();
        rope_forward(r["qkv"], r["table"], NH, KV, packed ? 0 : pos0, P);
        rope_backward(r["dqkv"], r["table"], NH, KV, P);
    }};
    if (packed) return k;
    k.f64 = [=](Ref64& r) {
        ref::rope_forward(r("qkv"), r("table"), B, T, NH, KV, HS, pos0);
        ref::rope_backward(r("dqkv"), r("table"), B, T, NH, KV, HS);
    };
    return k;
}

}  // namespace

void add_llama_ops(std::vector<OpDef>& defs) {
    defs.insert(defs.end(), {
                                {"rmsnorm", rmsnorm},
                                {"residual_rmsnorm", residual_rmsnorm},
                                {"residual_rmsnorm_inplace", residual_rmsnorm_inplace},
                                {"swiglu", swiglu},
                                {"swiglu_inplace", swiglu_inplace},
                                {"rope", rope},
                            });
}

}  // namespace llmt::kernels::cases
