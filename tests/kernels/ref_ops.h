// Plain reference implementations of every kernel, templated on the element type so the tests can run
// them in fp64 (for finite-difference gradient checks) and compare the fp32 kernels against them.
// Deliberately naive (llm.c train_gpt2.c style, full T x T attention matrices): a second,
// independently written formulation of each op. All gradients here are written with `=`.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace llmt::kernels::ref {

template <typename F>
void encoder_forward(F* out, const int32_t* inp, const F* wte, const F* wpe, int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                out[(b * T + t) * C + c] = wte[inp[b * T + t] * C + c] + wpe[t * C + c];
}

// dwte, dwpe accumulate (+=), as the real kernel.
template <typename F>
void encoder_backward(F* dwte, F* dwpe, const F* dout, const int32_t* inp, int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                dwte[inp[b * T + t] * C + c] += dout[(b * T + t) * C + c];
                dwpe[t * C + c] += dout[(b * T + t) * C + c];
            }
}

// A row's mean m and 1 / sqrt(biased variance + eps), two passes.
template <typename F>
void layernorm_stats(const F* x, int C, F eps, F& m, F& s) {
    m = 0;
    for (int c = 0; c < C; c++) m += x[c];
    m /= C;
    F v = 0;
    for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    v /= C;
    s = F(1) / std::sqrt(v + eps);
}

template <typename F>
void layernorm_forward(F* out, F* mean, F* rstd, const F* inp, const F* w, const F* bias, int N, int C,
                       F eps = F(1e-5)) {
    for (int r = 0; r < N; r++) {
        const F* x = inp + r * C;
        F m, s;
        layernorm_stats(x, C, eps, m, s);
        for (int c = 0; c < C; c++) out[r * C + c] = (x[c] - m) * s * w[c] + bias[c];
        mean[r] = m;
        rstd[r] = s;
    }
}

// Gradients overwritten (=).
template <typename F>
void layernorm_backward(F* dinp, F* dw, F* db, const F* dout, const F* inp, const F* w, int N, int C,
                        F eps = F(1e-5)) {
    for (int c = 0; c < C; c++) dw[c] = db[c] = 0;
    for (int r = 0; r < N; r++) {
        const F* x = inp + r * C;
        const F* dy = dout + r * C;
        F m, s;
        layernorm_stats(x, C, eps, m, s);
        // Direct chain rule through n_c = (x_c - m) s: dx_i = s (g_i - mean(g) - n_i mean(g n)), g = dy w.
        F mg = 0, mgn = 0;
        for (int c = 0; c < C; c++) {
            mg += dy[c] * w[c];
            mgn += dy[c] * w[c] * (x[c] - m) * s;
        }
        mg /= C;
        mgn /= C;
        for (int c = 0; c < C; c++) {
            const F n = (x[c] - m) * s;
            dinp[r * C + c] = s * (dy[c] * w[c] - mg - n * mgn);
            dw[c] += dy[c] * n;
            db[c] += dy[c];
        }
    }
}

template <typename F>
void matmul_forward(F* out, const F* inp, const F* w, const F* bias, int N, int C, int OC) {
    for (int r = 0; r < N; r++)
        for (int o = 0; o < OC; o++) {
            F s = bias ? bias[o] : F(0);
            for (int c = 0; c < C; c++) s += inp[r * C + c] * w[o * C + c];
            out[r * OC + o] = s;
        }
}

template <typename F>
void matmul_backward(F* dinp, F* dw, F* db, const F* dout, const F* inp, const F* w, int N, int C, int OC) {
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c++) {
            F s = 0;
            for (int o = 0; o < OC; o++) s += dout[r * OC + o] * w[o * C + c];
            dinp[r * C + c] = s;
        }
    for (int o = 0; o < OC; o++) {
        for (int c = 0; c < C; c++) {
            F s = 0;
            for (int r = 0; r < N; r++) s += dout[r * OC + o] * inp[r * C + c];
            dw[o * C + c] = s;
        }
        if (db) {
            F s = 0;
            for (int r = 0; r < N; r++) s += dout[r * OC + o];
            db[o] = s;
        }
    }
}

// Causal attention with grouped-query heads: qkv rows hold q (NH*HS), k (KV*HS), v (KV*HS); query head h reads
// kv head h / (NH/KV) (Hugging Face's repeat_kv). att (B,NH,T,T) probabilities (0 above the diagonal), out
// (B,T,C) with C = NH*HS.
template <typename F>
void attention_forward(F* out, std::vector<F>& att, const F* qkv, int B, int T, int C, int NH, int KV) {
    const int HS = C / NH, C3 = C + 2 * KV * HS;
    const F scale = F(1) / std::sqrt(F(HS));
    att.assign(static_cast<size_t>(B) * NH * T * T, F(0));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const int g = h / (NH / KV), ko = C + g * HS, vo = C + (KV + g) * HS;
            for (int t = 0; t < T; t++) {
                const F* q = qkv + (b * T + t) * C3 + h * HS;
                F* a = att.data() + ((static_cast<size_t>(b) * NH + h) * T + t) * T;
                F mx = -1e30;
                for (int j = 0; j <= t; j++) {
                    const F* k = qkv + (b * T + j) * C3 + ko;
                    F s = 0;
                    for (int i = 0; i < HS; i++) s += q[i] * k[i];
                    a[j] = s * scale;
                    mx = a[j] > mx ? a[j] : mx;
                }
                F sum = 0;
                for (int j = 0; j <= t; j++) sum += (a[j] = std::exp(a[j] - mx));
                for (int j = 0; j <= t; j++) a[j] /= sum;
                F* o = out + (b * T + t) * C + h * HS;
                for (int i = 0; i < HS; i++) {
                    F s = 0;
                    for (int j = 0; j <= t; j++) s += a[j] * qkv[(b * T + j) * C3 + vo + i];
                    o[i] = s;
                }
            }
        }
}

// dqkv (B,T,C3) = (dk, dv of a kv head summed over its query heads).
template <typename F>
void attention_backward(F* dqkv, const F* dout, const F* qkv, const std::vector<F>& att, int B, int T, int C,
                        int NH, int KV) {
    const int HS = C / NH, C3 = C + 2 * KV * HS;
    const F scale = F(1) / std::sqrt(F(HS));
    for (size_t i = 0; i < static_cast<size_t>(B) * T * C3; i++) dqkv[i] = 0;
    std::vector<F> datt(static_cast<size_t>(T)), dpre(static_cast<size_t>(T));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const int g = h / (NH / KV), ko = C + g * HS, vo = C + (KV + g) * HS;
            for (int t = 0; t < T; t++) {
                const F* a = att.data() + ((static_cast<size_t>(b) * NH + h) * T + t) * T;
                const F* dy = dout + (b * T + t) * C + h * HS;
                for (int j = 0; j <= t; j++) {
                    const F* v = qkv + (b * T + j) * C3 + vo;
                    F* dv = dqkv + (b * T + j) * C3 + vo;
                    F s = 0;
                    for (int i = 0; i < HS; i++) {
                        s += dy[i] * v[i];
                        dv[i] += a[j] * dy[i];
                    }
                    datt[j] = s;
                }
                for (int j = 0; j <= t; j++) {  // softmax backward: dpre_j = sum_k a_k (delta_jk - a_j) datt_k
                    F s = 0;
                    for (int k = 0; k <= t; k++) s += a[k] * ((j == k ? F(1) : F(0)) - a[j]) * datt[k];
                    dpre[j] = s;
                }
                const F* q = qkv + (b * T + t) * C3 + h * HS;
                F* dq = dqkv + (b * T + t) * C3 + h * HS;
                for (int j = 0; j <= t; j++) {
                    const F* k = qkv + (b * T + j) * C3 + ko;
                    F* dk = dqkv + (b * T + j) * C3 + ko;
                    for (int i = 0; i < HS; i++) {
                        dq[i] += dpre[j] * scale * k[i];
                        dk[i] += dpre[j] * scale * q[i];
                    }
                }
            }
        }
}

// Multi-head attention (KV == NH), the GPT-2 layout qkv (B,T,3C).
template <typename F>
void attention_forward(F* out, std::vector<F>& att, const F* qkv, int B, int T, int C, int NH) {
    attention_forward(out, att, qkv, B, T, C, NH, NH);
}
template <typename F>
void attention_backward(F* dqkv, const F* dout, const F* qkv, const std::vector<F>& att, int B, int T, int C,
                        int NH) {
    attention_backward(dqkv, dout, qkv, att, B, T, C, NH, NH);
}

// RMSNorm (LlamaRMSNorm): out = w * x / sqrt(mean(x^2) + eps); rstd (N) = 1 / sqrt(mean(x^2) + eps).
template <typename F>
void rmsnorm_forward(F* out, F* rstd, const F* inp, const F* w, F eps, int N, int C) {
    for (int r = 0; r < N; r++) {
        const F* x = inp + static_cast<size_t>(r) * C;
        F ms = 0;
        for (int c = 0; c < C; c++) ms += x[c] * x[c];
        ms /= C;
        const F s = F(1) / std::sqrt(ms + eps);
        for (int c = 0; c < C; c++) out[static_cast<size_t>(r) * C + c] = w[c] * (x[c] * s);
        rstd[r] = s;
    }
}

// Gradients overwritten (=). Chain rule through s = (m + eps)^(-1/2), m = sum x^2 / C: ds/dx_i = -s^3 x_i / C,
// so dx_i = s w_i dy_i - (s^3 x_i / C) sum_c dy_c w_c x_c.
template <typename F>
void rmsnorm_backward(F* dinp, F* dw, const F* dout, const F* inp, const F* w, F eps, int N, int C) {
    for (int c = 0; c < C; c++) dw[c] = 0;
    for (int r = 0; r < N; r++) {
        const F* x = inp + static_cast<size_t>(r) * C;
        const F* dy = dout + static_cast<size_t>(r) * C;
        F ms = 0, dyw_x = 0;
        for (int c = 0; c < C; c++) {
            ms += x[c] * x[c];
            dyw_x += dy[c] * w[c] * x[c];
        }
        ms /= C;
        const F s = F(1) / std::sqrt(ms + eps);
        for (int c = 0; c < C; c++) {
            dinp[static_cast<size_t>(r) * C + c] = s * w[c] * dy[c] - s * s * s * x[c] / C * dyw_x;
            dw[c] += dy[c] * x[c] * s;
        }
    }
}

template <typename F>
F sigmoid(F x) {
    return F(1) / (F(1) + std::exp(-x));
}

// SwiGLU: out (N,F) = silu(gate) * up, inp (N,2F) = [gate | up].
template <typename F>
void swiglu_forward(F* out, const F* inp, int N, int Fw) {
    for (int r = 0; r < N; r++)
        for (int j = 0; j < Fw; j++) {
            const F g = inp[static_cast<size_t>(r) * 2 * Fw + j], u = inp[static_cast<size_t>(r) * 2 * Fw + Fw + j];
            out[static_cast<size_t>(r) * Fw + j] = g * sigmoid(g) * u;
        }
}

// dinp (N,2F) =. d silu(g)/dg = sigmoid(g) + g sigmoid(g) (1 - sigmoid(g)).
template <typename F>
void swiglu_backward(F* dinp, const F* dout, const F* inp, int N, int Fw) {
    for (int r = 0; r < N; r++)
        for (int j = 0; j < Fw; j++) {
            const size_t gi = static_cast<size_t>(r) * 2 * Fw + j;
            const F g = inp[gi], u = inp[gi + Fw], dy = dout[static_cast<size_t>(r) * Fw + j];
            const F sg = sigmoid(g);
            dinp[gi] = dy * u * (sg + g * sg * (F(1) - sg));
            dinp[gi + Fw] = dy * g * sg;
        }
}

// RoPE as Hugging Face writes it: y = x * cos_full + rotate_half(x) * sin_full, with cos_full = [cos, cos],
// sin_full = [sin, sin] over the head's HS channels and rotate_half(x) = [-x2, x1]. table (Tmax, HS) = [cos | sin]
// per position (half columns each). Applied to the NH + KV leading heads of each qkv row (B,T,(NH+2KV)*HS).
// Calls f(head, table row) for the q and k heads (the NH + KV leading ones) of every qkv row at positions
// pos0 + t.
template <typename F, typename Fn>
void for_each_rope_head(F* qkv, const F* table, int B, int T, int NH, int KV, int HS, int pos0, Fn f) {
    const int C3 = (NH + 2 * KV) * HS;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH + KV; h++)
                f(qkv + (static_cast<size_t>(b) * T + t) * C3 + h * HS, table + static_cast<size_t>(pos0 + t) * HS);
}

template <typename F>
void rope_forward(F* qkv, const F* table, int B, int T, int NH, int KV, int HS, int pos0) {
    const int half = HS / 2;
    std::vector<F> x(static_cast<size_t>(HS)), rot(static_cast<size_t>(HS));
    for_each_rope_head(qkv, table, B, T, NH, KV, HS, pos0, [&](F* p, const F* cs) {
        for (int i = 0; i < HS; i++) x[i] = p[i];
        for (int i = 0; i < HS; i++) rot[i] = i < half ? -x[i + half] : x[i - half];
        for (int i = 0; i < HS; i++) p[i] = x[i] * cs[i % half] + rot[i] * cs[half + i % half];
    });
}

// The transpose: dx = cos_full * dy + rotate_half^T(sin_full * dy), rotate_half^T(z) = [z2, -z1].
template <typename F>
void rope_backward(F* dqkv, const F* table, int B, int T, int NH, int KV, int HS) {
    const int half = HS / 2;
    std::vector<F> z(static_cast<size_t>(HS)), dy(static_cast<size_t>(HS));
    for_each_rope_head(dqkv, table, B, T, NH, KV, HS, 0, [&](F* p, const F* cs) {
        for (int i = 0; i < HS; i++) {
            dy[i] = p[i];
            z[i] = dy[i] * cs[half + i % half];
        }
        for (int i = 0; i < HS; i++) p[i] = dy[i] * cs[i % half] + (i < half ? z[i + half] : -z[i - half]);
    });
}

// The table the model would build: inv_freq_i = theta^(-2i/HS), a = pos * inv_freq_i; rows [cos | sin].
inline std::vector<float> rope_table(int Tmax, int HS, double theta = 10000.0) {
    const int half = HS / 2;
    std::vector<float> t(static_cast<size_t>(Tmax) * HS);
    for (int p = 0; p < Tmax; p++)
        for (int i = 0; i < half; i++) {
            const double a = p * std::pow(theta, -2.0 * i / HS);
            t[static_cast<size_t>(p) * HS + i] = static_cast<float>(std::cos(a));
            t[static_cast<size_t>(p) * HS + half + i] = static_cast<float>(std::sin(a));
        }
    return t;
}

template <typename F>
F gelu(F x) {
    const F s = std::sqrt(F(2) / F(M_PI));
    return F(0.5) * x * (F(1) + std::tanh(s * (x + F(0.044715) * x * x * x)));
}

template <typename F>
F gelu_grad(F x) {
    const F s = std::sqrt(F(2) / F(M_PI));
    const F u = s * (x + F(0.044715) * x * x * x);
    const F t = std::tanh(u);
    return F(0.5) * (F(1) + t) + F(0.5) * x * (F(1) - t * t) * s * (F(1) + F(3) * F(0.044715) * x * x);
}

// losses (N), dlogits (N,Vp) = (softmax - onehot) * scale over the first V columns, 0 elsewhere.
template <typename F>
void classifier(F* losses, F* dlogits, const F* logits, const int32_t* y, F scale, int N, int V, int Vp) {
    for (int r = 0; r < N; r++) {
        const F* x = logits + static_cast<size_t>(r) * Vp;
        F mx = -1e30;
        for (int i = 0; i < V; i++) mx = x[i] > mx ? x[i] : mx;
        F sum = 0;
        for (int i = 0; i < V; i++) sum += std::exp(x[i] - mx);
        if (y[r] < 0) {
            losses[r] = 0;
        } else {
            losses[r] = std::log(sum) + mx - x[y[r]];
        }
        if (!dlogits) continue;
        for (int i = 0; i < Vp; i++) {
            F g = 0;
            if (y[r] >= 0 && i < V) g = (std::exp(x[i] - mx) / sum - (i == y[r] ? F(1) : F(0))) * scale;
            dlogits[static_cast<size_t>(r) * Vp + i] = g;
        }
    }
}

}  // namespace llmt::kernels::ref
