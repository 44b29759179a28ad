// Naive references of the image ops (conv2d, maxpool2d, relu) on NHWC tensors, templated on the element type
// so conv_test.cpp runs them in fp64 for finite differences and compares the fp32 kernels against them.
// Deliberately the direct loops (no im2col): a second, independent formulation. Gradients here are
// written (=), parameter gradients included.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace llmt::kernels::ref {

struct ConvDims {
    int B, H, W, C, OC, kh, kw, stride, pad;
    int OH() const { return (H + 2 * pad - kh) / stride + 1; }
    int OW() const { return (W + 2 * pad - kw) / stride + 1; }
};

// out (B,OH,OW,OC) = sum over (kh,kw,c) of inp[b, oh*s-pad+kh, ow*s-pad+kw, c] * w[oc,kh,kw,c] + bias[oc].
template <typename F>
void conv2d_forward(std::vector<F>& out, const std::vector<F>& inp, const std::vector<F>& w,
                    const std::vector<F>& bias, const ConvDims& d) {
    out.assign(static_cast<size_t>(d.B) * d.OH() * d.OW() * d.OC, F(0));
    for (int b = 0; b < d.B; b++)
        for (int oh = 0; oh < d.OH(); oh++)
            for (int ow = 0; ow < d.OW(); ow++)
                for (int oc = 0; oc < d.OC; oc++) {
                    F acc = bias.empty() ? F(0) : bias[oc];
                    for (int i = 0; i < d.kh; i++)
                        for (int j = 0; j < d.kw; j++) {
                            const int ih = oh * d.stride - d.pad + i, iw = ow * d.stride - d.pad + j;
                            if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) continue;
                            for (int c = 0; c < d.C; c++)
                                acc += inp[((static_cast<size_t>(b) * d.H + ih) * d.W + iw) * d.C + c] *
                                       w[((static_cast<size_t>(oc) * d.kh + i) * d.kw + j) * d.C + c];
                        }
                    out[((static_cast<size_t>(b) * d.OH() + oh) * d.OW() + ow) * d.OC + oc] = acc;
                }
}

// dinp, dw, dbias = the gradients of sum(out * dout).
template <typename F>
void conv2d_backward(std::vector<F>& dinp, std::vector<F>& dw, std::vector<F>& dbias, const std::vector<F>& dout,
                     const std::vector<F>& inp, const std::vector<F>& w, const ConvDims& d) {
    dinp.assign(inp.size(), F(0));
    dw.assign(w.size(), F(0));
    dbias.assign(static_cast<size_t>(d.OC), F(0));
    for (int b = 0; b < d.B; b++)
        for (int oh = 0; oh < d.OH(); oh++)
            for (int ow = 0; ow < d.OW(); ow++)
                for (int oc = 0; oc < d.OC; oc++) {
                    const F g = dout[((static_cast<size_t>(b) * d.OH() + oh) * d.OW() + ow) * d.OC + oc];
                    dbias[oc] += g;
                    for (int i = 0; i < d.kh; i++)
                        for (int j = 0; j < d.kw; j++) {
                            const int ih = oh * d.stride - d.pad + i, iw = ow * d.stride - d.pad + j;
                            if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) continue;
                            for (int c = 0; c < d.C; c++) {
                                const size_t xi = ((static_cast<size_t>(b) * d.H + ih) * d.W + iw) * d.C + c;
                                const size_t wi = ((static_cast<size_t>(oc) * d.kh + i) * d.kw + j) * d.C + c;
                                dinp[xi] += g * w[wi];
                                dw[wi] += g * inp[xi];
                            }
                        }
                }
}

// out (B,OH,OW,C) = max over each k x k window at stride s (no padding, floor); first max wins.
template <typename F>
void maxpool2d_forward(std::vector<F>& out, std::vector<int32_t>& argmax, const std::vector<F>& inp, int B, int H,
                       int W, int C, int k, int s) {
    const int OH = (H - k) / s + 1, OW = (W - k) / s + 1;
    out.assign(static_cast<size_t>(B) * OH * OW * C, F(0));
    argmax.assign(out.size(), 0);
    for (int b = 0; b < B; b++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++)
                for (int c = 0; c < C; c++) {
                    int best = -1;
                    F m = F(0);
                    for (int i = 0; i < k; i++)
                        for (int j = 0; j < k; j++) {
                            const int idx = (oh * s + i) * W + (ow * s + j);
                            const F v = inp[(static_cast<size_t>(b) * H * W + idx) * C + c];
                            if (best < 0 || v > m) m = v, best = idx;
                        }
                    const size_t o = ((static_cast<size_t>(b) * OH + oh) * OW + ow) * C + c;
                    out[o] = m;
                    argmax[o] = best;
                }
}

// dinp = dout routed to each window's max (recomputed from inp).
template <typename F>
void maxpool2d_backward(std::vector<F>& dinp, const std::vector<F>& dout, const std::vector<F>& inp, int B, int H,
                        int W, int C, int k, int s) {
    std::vector<F> out;
    std::vector<int32_t> arg;
    maxpool2d_forward(out, arg, inp, B, H, W, C, k, s);
    dinp.assign(inp.size(), F(0));
    const size_t per_image = arg.size() / static_cast<size_t>(B);
    for (size_t o = 0; o < arg.size(); o++) {
        const size_t b = o / per_image;
        dinp[(b * H * W + static_cast<size_t>(arg[o])) * C + o % static_cast<size_t>(C)] += dout[o];
    }
}

}  // namespace llmt::kernels::ref
