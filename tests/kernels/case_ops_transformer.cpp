// The GPT-2 ops of the case table (case_table.h): encoder, LayerNorm, matmul (with its bias, residual and GELU
// epilogues), attention, GELU, residual, dropout, scaling, the sum of squares and the classifier. Each builder names
// the op's tensors for one row, its calls (ops.h) and, where one exists, its float64 reference (ref_ops.h).
#include <cmath>
#include <vector>

#include "kernels/case_args.h"
#include "kernels/ops.h"
#include "kernels/ref_ops.h"

namespace llmt::kernels::cases {
namespace {

Call encoder(const Case& c) {
    const int B = c.d.B, T = c.d.T, C = c.d.C, V = c.d.V, maxT = c.d.maxT;
    Call k;
    k.args = {ids("inp", {B, T}, V),
              input("wte", {V, C}),
              input("wpe", {maxT, C}),
              output("out", {B, T, C}, {kTolElementwise, kTolOut}),
              input("dout", {B, T, C}),
              inout("dwte", {V, C}, {kTolReduce, kTolF32}, Kind::kF32),
              inout("dwpe", {maxT, C}, {kTolReduce, kTolF32}, Kind::kF32)};
    k.stages = {[](Run& r) {
        encoder_forward(r["out"], r["inp"], r["wte"], r["wpe"]);
        encoder_backward(r["dwte"], r["dwpe"], r["dout"], r["inp"]);
    }};
    k.f64 = [=](Ref64& r) {
        ref::encoder_forward(r("out"), r.ids("inp"), r("wte"), r("wpe"), B, T, C);
        ref::encoder_backward(r("dwte"), r("dwpe"), r("dout"), r.ids("inp"), B, T, C);
    };
    return k;
}

// Inputs with a non-zero mean everywhere and one row with a large one (row 1 shifted by 5: the variance's two passes
// matter).
void shift_rows(std::vector<float>& x, int C) {
    for (auto& v : x) v += 0.5f;
    for (int i = 0; i < C && C + i < static_cast<int>(x.size()); i++) x[static_cast<size_t>(C + i)] += 5.0f;
}

// LayerNorm forward, then backward from its statistics; `colsum` adds the dinp column sums the fused bias gradient
// takes (the knob rows of case_table.cpp).
Call layernorm(const Case& c, bool colsum) {
    const int B = c.d.B, T = c.d.T, C = c.d.C;
    const float eps = static_cast<float>(c.d.eps);
    Call k;
    k.params = {{"eps", eps}};
    Arg x = input("inp", {B, T, C}, 2.0f);
    x.shape_values = [C](std::vector<float>& v) { shift_rows(v, C); };
    Arg bias = input("bias", {C});
    if (colsum) bias.values.assign(static_cast<size_t>(C), 0.0f);  // as GPT-2's step feeds the fused bias gradient
    k.args = {x,
              input("weight", {C}),
              bias,
              output("out", {B, T, C}, {kTolReduce, kTolOut}),
              output("mean", {B, T}, {kTolReduce, kTolF32}, Kind::kF32),
              output("rstd", {B, T}, {kTolReduce, kTolStat}, Kind::kF32),
              input("dout", {B, T, C}),
              inout("dinp", {B, T, C}, {kTolBackward, kTolGrad}),
              inout("dweight", {C}, {kTolBackward, kTolGrad}, Kind::kF32),
              inout("dbias", {C}, {kTolBackward, kTolGrad}, Kind::kF32)};
    if (colsum) k.args.push_back(inout("colsum", {C}, {kTolBackward, kTolGrad}, Kind::kF32));
    k.stages = {[=](Run& r) {
        layernorm_forward(r["out"], r["mean"], r["rstd"], r["inp"], r["weight"], r["bias"], eps);
        layernorm_backward(r["dinp"], r["dweight"], r["dbias"], r["dout"], r["inp"], r["weight"], r["mean"], r["rstd"],
                           colsum ? r["colsum"] : Tensor());
    }};
    if (colsum) return k;
    k.f64 = [=](Ref64& r) {
        const int N = B * T;
        ref::layernorm_forward(r("out"), r("mean"), r("rstd"), r("inp"), r("weight"), r("bias"), N, C, double{eps});
        std::vector<double> dx(static_cast<size_t>(N) * C), dw(C), db(C);
        ref::layernorm_backward(dx.data(), dw.data(), db.data(), r("dout"), r("inp"), r("weight"), N, C, double{eps});
        add_into(r("dinp"), dx);
        add_into(r("dweight"), dw);
        add_into(r("dbias"), db);
    };
    return k;
}

// out = x w^T + b, then the backward of it; reps > 1 repeats both (dweight, dbias accumulate each time).
Call matmul(const Case& c) {
    const int N = c.d.B * c.d.T, C = c.d.C, OC = c.d.OC, reps = c.d.reps;
    const bool bias = c.d.bias;
    Call k;
    k.args = {input("inp", {N, C}),
              input("weight", {OC, C}, 0.1f),
              input("bias", {OC}),
              output("out", {N, OC}, {kTolReduce, kTolOut}),
              input("dout", {N, OC}),
              output("dinp", {N, C}, {kTolReduce, kTolOut}),
              inout("dweight", {OC, C}, {kTolBackward, kTolOut}, Kind::kF32),
              inout("dbias", {OC}, {bias ? kTolBackward : kNotCompared, bias ? kTolOut : kNotCompared}, Kind::kF32)};
    k.stages = {[=](Run& r) {
        for (int i = 0; i < reps; i++) {
            matmul_forward(r["out"], r["inp"], r["weight"], bias ? r["bias"] : Tensor());
            matmul_backward(r["dinp"], r["dweight"], bias ? r["dbias"] : Tensor(), r["dout"], r["inp"], r["weight"]);
        }
    }};
    k.f64 = [=](Ref64& r) {
        ref::matmul_forward(r("out"), r("inp"), r("weight"), bias ? r("bias") : nullptr, N, C, OC);
        std::vector<double> dw(static_cast<size_t>(OC) * C), db(OC);
        ref::matmul_backward(r("dinp"), dw.data(), db.data(), r("dout"), r("inp"), r("weight"), N, C, OC);
        for (int i = 0; i < reps; i++) {
            add_into(r("dweight"), dw);
            if (bias) add_into(r("dbias"), db);
        }
    };
    return k;
}

// out = residual + x w^T + b (cuBLASLt's C matrix when fused), rounded once; the residual is only read.
Call matmul_residual(const Case& c) {
    const int N = c.d.B * c.d.T, C = c.d.C, OC = c.d.OC;
    Call k;
    Arg res = input("residual", {N, OC}, 2.0f);
    res.unchanged = true;
    k.args = {input("inp", {N, C}), input("weight", {OC, C}, 0.1f), input("bias", {OC}), res,
              output("out", {N, OC}, {kTolReduce, kTolOut})};
    k.stages = {[](Run& r) { matmul_forward(r["out"], r["inp"], r["weight"], r["bias"], r["residual"]); }};
    k.f64 = [=](Ref64& r) {
        ref::matmul_forward(r("out"), r("inp"), r("weight"), r("bias"), N, C, OC);
        for (size_t i = 0; i < static_cast<size_t>(N) * OC; i++) r("out")[i] += r("residual")[i];
    };
    return k;
}

// The GELU epilogues: forward with bias (plain and GELU, saving the pre-activation), the plain backward, and the
// backward through the GELU of the layer above (pre-activation `pre_above`; its output `gelu_above` is the GEMM's
// input, as the CUDA run stores it: the CPU reference takes the GPU's values of it).
Call matmul_gelu(const Case& c) {
    const int N = c.d.B * c.d.T, C = c.d.C, OC = c.d.OC;
    Call k;
    k.args = {input("inp", {N, C}),
              input("weight", {OC, C}, 0.1f),
              input("bias", {OC}),
              output("out", {N, OC}, {kTolReduce, kTolOut}),
              output("pre_gelu", {N, OC}, {kTolReduce, kTolOut}),
              output("gelu_out", {N, OC}, {kTolReduce, kTolOut}),
              input("dout", {N, OC}),
              output("dinp", {N, C}, {kTolReduce, kTolOut}),
              inout("dweight", {OC, C}, {kTolBackward, kTolOut}, Kind::kF32),
              inout("dbias", {OC}, {kTolBackward, kTolOut}, Kind::kF32),
              input("pre_above", {N, C}, 1.5f),
              output("gelu_above", {N, C}, {}),
              output("dinp_gelu", {N, C}, {kTolBackward, kTolGrad}),
              inout("dweight_gelu", {OC, C}, {kTolBackward, kTolOut}, Kind::kF32),
              inout("dbias_gelu", {OC}, {kTolBackward, kTolOut}, Kind::kF32)};
    k.stages = {[](Run& r) {
                    matmul_forward(r["out"], r["inp"], r["weight"], r["bias"]);
                    matmul_forward_gelu(r["gelu_out"], r["pre_gelu"], r["inp"], r["weight"], r["bias"]);
                    matmul_backward(r["dinp"], r["dweight"], r["dbias"], r["dout"], r["inp"], r["weight"]);
                    gelu_forward(r["gelu_above"], r["pre_above"]);
                },
                [](Run& r) {
                    matmul_backward_gelu(r["dinp_gelu"], r["pre_above"], r["dweight_gelu"], r["dbias_gelu"], r["dout"],
                                         r["gelu_above"], r["weight"]);
                }};
    k.handoff = {"gelu_above"};
    return k;
}

// Causal attention over qkv rows (q: NH heads, k and v: KV heads), forward then backward; with t0 > 0 also the
// KV-cache decode of rows t0.. over the T cached positions. Packed rows pass positions (the block-diagonal mask).
// `colsum`: the backward also adds dqkv's column sums (the fused bias gradient; forward outputs not compared). A bf16
// run's CPU backward reads the GPU's forward results (bf16 out, as training does).
Call attention(const Case& c, bool colsum) {
    const int B = batch_rows(c), T = c.d.T, C = c.d.C, NH = c.d.NH, KV = c.d.KV ? c.d.KV : c.d.NH;
    const int HS = C / NH, C3 = C + 2 * KV * HS, t0 = c.d.t0;
    const bool packed = !c.packing.empty();
    Call k;
    const Tol fwd_out = colsum ? Tol{} : Tol{kTolReduce, kTolGrad},
              fwd_lse = colsum ? Tol{} : Tol{kTolReduce, kTolOut};
    k.args = {input("qkv", {B, T, C3}), output("out", {B, T, C}, fwd_out),
              output("lse", {B, NH, T}, fwd_lse, Kind::kF32), input("dout", {B, T, C}),
              output("dqkv", {B, T, C3}, {kTolBackward, kTolGrad})};
    if (packed) {
        Arg p = ids("positions", {B, T}, 1);
        p.ids = packed_positions(c);
        k.args.push_back(p);
    }
    if (colsum) k.args.push_back(inout("colsum", {C3}, {kTolBackward, kTolGrad}, Kind::kF32));
    if (t0 > 0) k.args.push_back(output("cached", {B, T - t0, C}, {kTolReduce, kTolGrad}));
    k.stages = {
        [=](Run& r) { attention_forward(r["out"], r["lse"], r["qkv"], NH, KV, packed ? r["positions"] : Tensor()); },
        [=](Run& r) {
            attention_backward(r["dqkv"], r["dout"], r["qkv"], r["out"], r["lse"], NH, KV,
                               colsum ? r["colsum"] : Tensor(), packed ? r["positions"] : Tensor());
            if (t0 > 0) attention_forward_cached(r["cached"], r["qkv"], t0, NH, KV);
        }};
    k.handoff = {"out", "lse"};
    if (packed || colsum) return k;
    k.f64 = [=](Ref64& r) {
        std::vector<double> att;
        ref::attention_forward(r("out"), att, r("qkv"), B, T, C, NH, KV);
        ref::attention_backward(r("dqkv"), r("dout"), r("qkv"), att, B, T, C, NH, KV);
        for (int b = 0; b < B; b++)  // lse: log sum_j<=t exp(q_t . k_j / sqrt(HS)) per (b, h, t)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) {
                    const double* q = r("qkv") + (static_cast<size_t>(b) * T + t) * C3 + h * HS;
                    std::vector<double> s(static_cast<size_t>(t) + 1);
                    double mx = -INFINITY, sum = 0.0;
                    for (int j = 0; j <= t; j++) {
                        const double* kj = r("qkv") + (static_cast<size_t>(b) * T + j) * C3 + C + (h / (NH / KV)) * HS;
                        double dot = 0.0;
                        for (int d = 0; d < HS; d++) dot += q[d] * kj[d];
                        s[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(HS));
                        mx = std::max(mx, s[static_cast<size_t>(j)]);
                    }
                    for (double v : s) sum += std::exp(v - mx);
                    r("lse")[(static_cast<size_t>(b) * NH + h) * T + t] = mx + std::log(sum);
                }
        if (t0 > 0)
            for (int b = 0; b < B; b++)
                for (size_t i = 0; i < static_cast<size_t>(T - t0) * C; i++)
                    r("cached")[static_cast<size_t>(b) * (T - t0) * C + i] =
                        r("out")[(static_cast<size_t>(b) * T + t0) * C + i];
    };
    return k;
}

Call gelu(const Case& c) {
    const int N = c.d.N;
    Call k;
    k.args = {input("inp", {N}, 3.0f), input("dout", {N}), output("out", {N}, {kTolElementwise, kTolOut}),
              output("dinp", {N}, {kTolElementwise, kTolOut})};
    k.stages = {[](Run& r) {
        gelu_forward(r["out"], r["inp"]);
        gelu_backward(r["dinp"], r["inp"], r["dout"]);
    }};
    k.f64 = [=](Ref64& r) {
        for (int i = 0; i < N; i++) {
            r("out")[i] = ref::gelu(r("inp")[i]);
            r("dinp")[i] = ref::gelu_grad(r("inp")[i]) * r("dout")[i];
        }
    };
    return k;
}

Call residual_forward_op(const Case& c) {
    const int N = c.d.N;
    Call k;
    k.args = {input("inp1", {N}), input("inp2", {N}), output("out", {N}, {kTolElementwise, kTolOut})};
    k.stages = {[](Run& r) { residual_forward(r["out"], r["inp1"], r["inp2"]); }};
    k.f64 = [=](Ref64& r) {
        for (int i = 0; i < N; i++) r("out")[i] = r("inp1")[i] + r("inp2")[i];
    };
    return k;
}

Call residual_backward_op(const Case& c) {
    const int N = c.d.N;
    Call k;
    k.args = {input("dout", {N}), inout("dinp1", {N}, {kTolElementwise, kTolOut}),
              inout("dinp2", {N}, {kTolElementwise, kTolOut})};
    k.stages = {[](Run& r) { residual_backward(r["dinp1"], r["dinp2"], r["dout"]); }};
    k.f64 = [=](Ref64& r) {
        for (int i = 0; i < N; i++) {
            r("dinp1")[i] += r("dout")[i];
            r("dinp2")[i] += r("dout")[i];
        }
    };
    return k;
}

// The same mask on both backends (a counter-based hash of the seed and the index): a differing mask is an O(1) error
// at that element.
Call dropout(const Case& c) {
    const int N = c.d.N;
    Call k;
    k.args = {input("inp", {N}), input("dout", {N}), output("out", {N}, {kTolElementwise, kTolOut}),
              output("dinp", {N}, {kTolElementwise, kTolOut})};
    k.stages = {[](Run& r) {
        const uint64_t seed = 0x1234567ull + r.seed();
        dropout_forward(r["out"], r["inp"], 0.1f, seed);
        dropout_backward(r["dinp"], r["dout"], 0.1f, seed);
    }};
    return k;
}

Call scale(const Case& c) {
    const int N = c.d.N;
    Call k;
    k.args = {inout("x", {N}, {kTolElementwise, kTolOut})};
    k.stages = {[](Run& r) { scale_inplace(r["x"], 0.37f); }};
    k.f64 = [=](Ref64& r) {
        for (int i = 0; i < N; i++) r("x")[i] *= double{0.37f};
    };
    return k;
}

// Both backends accumulate in fp64: only the order of the additions differs => 1e-12.
Call sum_squares_op(const Case& c) {
    const int N = c.d.N;
    Call k;
    k.args = {input("x", {N})};
    k.stages = {[](Run& r) { r.scalar("sum", sum_squares(r["x"])); }};
    k.scalars = {{"sum", {1e-12, 1e-12}}};
    k.f64 = [=](Ref64& r) {
        double s = 0.0;
        for (int i = 0; i < N; i++) s += r("x")[i] * r("x")[i];
        r.scalars["sum"] = s;
    };
    return k;
}

// Targets: the last real class at row 1, and every 37th row from row 3 ignored (-1).
void shape_targets(std::vector<int32_t>& t, int V) {
    if (t.size() > 1) t[1] = V - 1;
    for (size_t i = 3; i < t.size(); i += 37) t[i] = -1;
}
int valid_targets(int rows) {
    int ignored = 0;
    for (int i = 3; i < rows; i += 37) ignored++;
    return rows - ignored;
}

// The fused classifier: losses (fp32) and dlogits written in place over the logits, scaled by 1 / valid rows; padding
// columns (V..Vp) get zero gradients.
Call classifier(const Case& c) {
    const int R = c.d.B * c.d.T, V = c.d.V, Vp = c.d.Vp;
    const float dloss = 1.0f / static_cast<float>(valid_targets(R));
    Call k;
    Arg tg = ids("targets", {c.d.B, c.d.T}, V);
    tg.shape_ids = [V](std::vector<int32_t>& t) { shape_targets(t, V); };
    k.args = {inout("logits", {c.d.B, c.d.T, Vp}, {kTolReduce, kTolOut}, Kind::kAct, 3.0f), tg,
              output("losses", {c.d.B, c.d.T}, {kTolReduce, kTolF32}, Kind::kF32)};
    k.stages = {[=](Run& r) { classifier_forward_backward(r["losses"], r["logits"], r["targets"], dloss, V); }};
    k.params = {{"dloss", dloss}};
    k.f64 = [=](Ref64& r) {
        std::vector<double> dl(static_cast<size_t>(R) * Vp);
        ref::classifier(r("losses"), dl.data(), r("logits"), r.ids("targets"), double{dloss}, R, V, Vp);
        std::copy(dl.begin(), dl.end(), r("logits"));
    };
    return k;
}

// The classifier's loss alone and the softmax (probabilities, zero over the padding columns).
Call classifier_forward_op(const Case& c) {
    const int R = c.d.B * c.d.T, V = c.d.V, Vp = c.d.Vp;
    Call k;
    Arg tg = ids("targets", {c.d.B, c.d.T}, V);
    tg.shape_ids = [V](std::vector<int32_t>& t) { shape_targets(t, V); };
    k.args = {input("logits", {c.d.B, c.d.T, Vp}, 3.0f), tg,
              output("losses", {c.d.B, c.d.T}, {kTolReduce, kTolF32}, Kind::kF32),
              output("probs", {c.d.B, c.d.T, Vp}, {kTolReduce, kTolOut})};
    k.stages = {[=](Run& r) {
        classifier_forward(r["losses"], r["logits"], r["targets"], V);
        softmax_forward(r["probs"], r["logits"], V);
    }};
    k.f64 = [=](Ref64& r) {
        ref::classifier(r("losses"), static_cast<double*>(nullptr), r("logits"), r.ids("targets"), 1.0, R, V, Vp);
        for (int row = 0; row < R; row++) {
            const double* x = r("logits") + static_cast<size_t>(row) * Vp;
            double* p = r("probs") + static_cast<size_t>(row) * Vp;
            double mx = x[0], sum = 0.0;
            for (int i = 0; i < V; i++) mx = std::max(mx, x[i]);
            for (int i = 0; i < V; i++) sum += std::exp(x[i] - mx);
            for (int i = 0; i < Vp; i++) p[i] = i < V ? std::exp(x[i] - mx) / sum : 0.0;
        }
    };
    return k;
}

}  // namespace

void add_transformer_ops(std::vector<OpDef>& defs) {
    defs.insert(defs.end(), {
                                {"encoder", encoder},
                                {"layernorm", [](const Case& c) { return layernorm(c, false); }},
                                {"layernorm_colsum", [](const Case& c) { return layernorm(c, true); }},
                                {"matmul", matmul},
                                {"matmul_residual", matmul_residual},
                                {"matmul_gelu", matmul_gelu},
                                {"attention", [](const Case& c) { return attention(c, false); }},
                                {"attention_colsum", [](const Case& c) { return attention(c, true); }},
                                {"gelu", gelu},
                                {"residual_forward", residual_forward_op},
                                {"residual_backward", residual_backward_op},
                                {"dropout", dropout},
                                {"scale", scale},
                                {"sum_squares", sum_squares_op},
                                {"classifier", classifier},
                                {"classifier_forward", classifier_forward_op},
                            });
}

}  // namespace llmt::kernels::cases
