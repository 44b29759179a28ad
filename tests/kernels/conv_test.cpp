// The image ops (kernels/ops.h conv2d, maxpool2d, relu): finite differences of the fp64 references of
// ref_conv.h, then the fp32 CPU kernels against those references on odd sizes, stride 1 and 2, padding 0
// and 1, C = 1 and C = 32, including the grad conventions (dinp written over NaN poison; dweight, dbias +=).
// PyTorch's own conv/pool/relu are the reference of tests/reference/conv_reference_test.cpp.
// Tolerances: FD 1e-6 relative in fp64 (h = 1e-6: truncation ~h^2, rounding ~1e-16/h; a wrong formula is
// off by O(1)). fp32 vs fp64: sums of at most KH*KW*C = 288 products (forward, dcols) or B*OH*OW = 392
// (dweight) with 6e-8 rounding each stay near 1e-6 of the output's scale; 2e-5 leaves room for the GEMM's
// blocking while any indexing mistake gives errors of order 1. Max pooling and ReLU move values without
// arithmetic, so they must match exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/bf16.h"
#include "core/check.h"
#include "kernels/ops.h"
#include "ref_conv.h"
#include "test_util.h"

namespace llmt::kernels {
namespace {

using test::cast;
using test::dot;
using test::fd_check;
using test::randn;
using test::rel_err;
constexpr double kFdTol = 1e-6;
constexpr double kTol = 2e-5;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor t4(std::vector<float>& v, int64_t a, int64_t b, int64_t c, int64_t d) { return Tensor(v.data(), {a, b, c, d}); }

// Odd extents, stride 2, padding 0/1, C = 1 (MNIST's first layer) and C = 32, a 1x1 and a 5x3 window.
const std::vector<ref::ConvDims> kConvCases = {
    {2, 7, 5, 1, 4, 3, 3, 1, 1},  {2, 9, 8, 3, 5, 3, 3, 2, 0}, {1, 6, 7, 32, 8, 3, 3, 2, 1},
    {3, 5, 5, 32, 6, 3, 3, 1, 0}, {2, 4, 6, 4, 3, 1, 1, 1, 0}, {2, 7, 9, 2, 3, 5, 3, 2, 2},
};

TEST(GradCheck, Conv2d) {
    for (const ref::ConvDims d : {ref::ConvDims{2, 5, 4, 2, 3, 3, 3, 1, 1}, ref::ConvDims{1, 6, 5, 3, 2, 3, 3, 2, 0},
                                  ref::ConvDims{2, 4, 4, 1, 2, 3, 3, 2, 1}}) {
        SCOPED_TRACE(testing::Message() << "H=" << d.H << " W=" << d.W << " C=" << d.C << " stride=" << d.stride
                                        << " pad=" << d.pad);
        auto x = cast<double>(randn(static_cast<size_t>(d.B) * d.H * d.W * d.C, 1));
        auto w = cast<double>(randn(static_cast<size_t>(d.OC) * d.kh * d.kw * d.C, 2));
        auto bias = cast<double>(randn(d.OC, 3));
        auto R = cast<double>(randn(static_cast<size_t>(d.B) * d.OH() * d.OW() * d.OC, 4));
        std::vector<double> out, dx, dw, db;
        auto loss = [&] {
            ref::conv2d_forward(out, x, w, bias, d);
            return dot(out, R);
        };
        ref::conv2d_backward(dx, dw, db, R, x, w, d);
        EXPECT_LT(fd_check(x, dx, loss), kFdTol);
        EXPECT_LT(fd_check(w, dw, loss), kFdTol);
        EXPECT_LT(fd_check(bias, db, loss), kFdTol);
    }
}

TEST(GradCheck, MaxPool2d) {
    const int B = 2, H = 5, W = 7, C = 3;  // odd: the last row and column are dropped
    for (const auto& [k, s] : {std::pair{2, 2}, std::pair{3, 2}}) {
        auto x = cast<double>(randn(static_cast<size_t>(B) * H * W * C, 5));  // distinct values: no ties
        const int OH = (H - k) / s + 1, OW = (W - k) / s + 1;
        auto R = cast<double>(randn(static_cast<size_t>(B) * OH * OW * C, 6));
        std::vector<double> out, dx;
        std::vector<int32_t> arg;
        auto loss = [&] {
            ref::maxpool2d_forward(out, arg, x, B, H, W, C, k, s);
            return dot(out, R);
        };
        ref::maxpool2d_backward(dx, R, x, B, H, W, C, k, s);
        EXPECT_LT(fd_check(x, dx, loss), kFdTol);
    }
}

TEST(ConvOps, Conv2dMatchesReference) {
    uint32_t seed = 100;
    for (const ref::ConvDims& d : kConvCases) {
        SCOPED_TRACE(testing::Message() << "B=" << d.B << " H=" << d.H << " W=" << d.W << " C=" << d.C
                                        << " OC=" << d.OC << " k=" << d.kh << "x" << d.kw << " stride=" << d.stride
                                        << " pad=" << d.pad);
        const int OH = d.OH(), OW = d.OW(), K = d.kh * d.kw * d.C;
        auto x = randn(static_cast<size_t>(d.B) * d.H * d.W * d.C, seed++);
        auto w = randn(static_cast<size_t>(d.OC) * K, seed++, 0.3f);
        auto bias = randn(d.OC, seed++);
        auto dout = randn(static_cast<size_t>(d.B) * OH * OW * d.OC, seed++);
        std::vector<float> out(dout.size(), kNaN), cols(static_cast<size_t>(d.B) * OH * OW * K, kNaN);
        const Conv2dGeom g{d.kh, d.kw, d.stride, d.pad};
        conv2d_forward(t4(out, d.B, OH, OW, d.OC), Tensor(cols.data(), {int64_t{d.B} * OH * OW, K}),
                       t4(x, d.B, d.H, d.W, d.C), t4(w, d.OC, d.kh, d.kw, d.C), Tensor(bias.data(), {d.OC}), g);
        std::vector<double> rout, rdx, rdw, rdb;
        ref::conv2d_forward(rout, cast<double>(x), cast<double>(w), cast<double>(bias), d);
        EXPECT_LT(rel_err(out, rout), kTol);
        ref::conv2d_backward(rdx, rdw, rdb, cast<double>(dout), cast<double>(x), cast<double>(w), d);
        // dweight and dbias accumulate onto what is there; dinp is written over NaN poison.
        std::vector<float> dx(x.size(), kNaN), dw(w.size(), 0.5f), db(d.OC, -0.25f);
        conv2d_backward(t4(dx, d.B, d.H, d.W, d.C), t4(dw, d.OC, d.kh, d.kw, d.C), Tensor(db.data(), {d.OC}),
                        t4(dout, d.B, OH, OW, d.OC), Tensor(cols.data(), {int64_t{d.B} * OH * OW, K}),
                        t4(x, d.B, d.H, d.W, d.C), t4(w, d.OC, d.kh, d.kw, d.C), g);
        for (auto& v : rdw) v += 0.5;
        for (auto& v : rdb) v -= 0.25;
        EXPECT_LT(rel_err(dx, rdx), kTol);
        EXPECT_LT(rel_err(dw, rdw), kTol);
        EXPECT_LT(rel_err(db, rdb), kTol);
    }
}

// The first layer: no dinp, no bias; the weight gradient alone.
TEST(ConvOps, Conv2dWithoutInputGradOrBias) {
    const ref::ConvDims d{3, 8, 6, 1, 5, 3, 3, 1, 1};
    const int OH = d.OH(), OW = d.OW(), K = d.kh * d.kw * d.C;
    auto x = randn(static_cast<size_t>(d.B) * d.H * d.W, 7);
    auto w = randn(static_cast<size_t>(d.OC) * K, 8);
    auto dout = randn(static_cast<size_t>(d.B) * OH * OW * d.OC, 9);
    std::vector<float> out(dout.size()), cols(static_cast<size_t>(d.B) * OH * OW * K), dw(w.size(), 0.0f);
    const Conv2dGeom g{3, 3, 1, 1};
    const Tensor tcols(cols.data(), {int64_t{d.B} * OH * OW, K});
    conv2d_forward(t4(out, d.B, OH, OW, d.OC), tcols, t4(x, d.B, d.H, d.W, 1), t4(w, d.OC, 3, 3, 1), {}, g);
    conv2d_backward({}, t4(dw, d.OC, 3, 3, 1), {}, t4(dout, d.B, OH, OW, d.OC), tcols, t4(x, d.B, d.H, d.W, 1),
                    t4(w, d.OC, 3, 3, 1), g);
    std::vector<double> rout, rdx, rdw, rdb;
    ref::conv2d_forward(rout, cast<double>(x), cast<double>(w), std::vector<double>{}, d);
    ref::conv2d_backward(rdx, rdw, rdb, cast<double>(dout), cast<double>(x), cast<double>(w), d);
    EXPECT_LT(rel_err(out, rout), kTol);
    EXPECT_LT(rel_err(dw, rdw), kTol);
}

TEST(ConvOps, Conv2dRejectsWrongShapes) {
    std::vector<float> x(2 * 5 * 5 * 2), w(4 * 3 * 3 * 2), out(2 * 5 * 5 * 4), cols(2 * 5 * 5 * 18);
    const Tensor tcols(cols.data(), {50, 18});
    const auto conv = [&](Tensor weight, Tensor c, Conv2dGeom g) {
        conv2d_forward(t4(out, 2, 5, 5, 4), c, t4(x, 2, 5, 5, 2), weight, {}, g);
    };
    EXPECT_NO_THROW(conv(t4(w, 4, 3, 3, 2), tcols, {3, 3, 1, 1}));
    EXPECT_THROW(conv(t4(w, 4, 2, 3, 3), tcols, {3, 3, 1, 1}), InternalError);  // torch's (OC,C,KH,KW) unpermuted
    EXPECT_THROW(conv(t4(w, 4, 3, 3, 2), tcols, {3, 3, 2, 1}), InternalError);  // stride 2: 3x3 out, not 5x5
    EXPECT_THROW(conv(t4(w, 4, 3, 3, 2), Tensor(cols.data(), {50, 17}), {3, 3, 1, 1}), InternalError);  // cols
    EXPECT_THROW(conv(t4(w, 4, 3, 3, 2), tcols, {3, 3, 0, 1}), InternalError);  // stride 0
}

TEST(ConvOps, MaxPool2dMatchesReference) {
    uint32_t seed = 200;
    struct Case {
        int B, H, W, C, k, s;
    };
    for (const Case c :
         {Case{2, 28, 28, 1, 2, 2}, Case{2, 7, 5, 32, 2, 2}, Case{1, 9, 6, 3, 3, 2}, Case{3, 4, 4, 5, 2, 1}}) {
        SCOPED_TRACE(testing::Message() << "H=" << c.H << " W=" << c.W << " C=" << c.C << " k=" << c.k
                                        << " s=" << c.s);
        const int OH = (c.H - c.k) / c.s + 1, OW = (c.W - c.k) / c.s + 1;
        auto x = randn(static_cast<size_t>(c.B) * c.H * c.W * c.C, seed++);
        for (size_t i = 0; i < x.size(); i += 7) x[i] = std::round(x[i]);  // some ties: the first max wins
        auto dout = randn(static_cast<size_t>(c.B) * OH * OW * c.C, seed++);
        std::vector<float> out(dout.size(), kNaN), dx(x.size(), kNaN);
        std::vector<int32_t> arg(dout.size(), -1);
        const Tensor targ(arg.data(), {c.B, OH, OW, c.C}, DType::kI32);
        maxpool2d_forward(t4(out, c.B, OH, OW, c.C), targ, t4(x, c.B, c.H, c.W, c.C), c.k, c.s);
        maxpool2d_backward(t4(dx, c.B, c.H, c.W, c.C), t4(dout, c.B, OH, OW, c.C), targ, c.k, c.s);
        std::vector<float> rout, rdx;
        std::vector<int32_t> rarg;
        ref::maxpool2d_forward(rout, rarg, x, c.B, c.H, c.W, c.C, c.k, c.s);
        ref::maxpool2d_backward(rdx, dout, x, c.B, c.H, c.W, c.C, c.k, c.s);
        EXPECT_EQ(out, rout);
        EXPECT_EQ(arg, rarg);
        EXPECT_EQ(dx, rdx);
    }
}

// torch propagates NaN through max pooling (a NaN in the window is the max).
TEST(ConvOps, MaxPool2dPropagatesNaN) {
    std::vector<float> x = {1.0f, kNaN, 3.0f, 2.0f}, out(1);
    std::vector<int32_t> arg(1);
    maxpool2d_forward(t4(out, 1, 1, 1, 1), Tensor(arg.data(), {1, 1, 1, 1}, DType::kI32), t4(x, 1, 2, 2, 1));
    EXPECT_TRUE(std::isnan(out[0]));
    EXPECT_EQ(arg[0], 1);
}

// The vectorised 2x2 path (16 channels a step, then a scalar tail): NaNs in the first, a middle and the
// last tap of windows, in vector lanes and in the tail, against the scalar rule (first NaN wins).
TEST(ConvOps, MaxPool2dNaNInVectorLanes) {
    const int B = 2, H = 4, W = 6, C = 19, OH = 2, OW = 3;
    auto x = randn(static_cast<size_t>(B) * H * W * C, 77);
    for (size_t i = 0; i < x.size(); i += 13) x[i] = kNaN;
    std::vector<float> out(static_cast<size_t>(B) * OH * OW * C);
    std::vector<int32_t> arg(out.size());
    maxpool2d_forward(t4(out, B, OH, OW, C), Tensor(arg.data(), {B, OH, OW, C}, DType::kI32), t4(x, B, H, W, C));
    // ref_conv.h's pooling has no NaN rule: the kernel's (torch's) rule written out here.
    std::vector<float> rout(out.size());
    std::vector<int32_t> rarg(out.size());
    for (int b = 0; b < B; b++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++)
                for (int c = 0; c < C; c++) {
                    const size_t o = ((static_cast<size_t>(b) * OH + oh) * OW + ow) * C + c;
                    for (int t = 0; t < 4; t++) {
                        const int idx = (2 * oh + t / 2) * W + 2 * ow + t % 2;
                        const float v = x[(static_cast<size_t>(b) * H * W + idx) * C + c];
                        if (t == 0 || v > rout[o] || (std::isnan(v) && !std::isnan(rout[o])))
                            rout[o] = v, rarg[o] = idx;
                    }
                }
    int nans = 0;
    for (size_t i = 0; i < out.size(); i++) {
        nans += std::isnan(rout[i]);
        EXPECT_TRUE(std::isnan(out[i]) == std::isnan(rout[i]) && (std::isnan(out[i]) || out[i] == rout[i])) << i;
        EXPECT_EQ(arg[i], rarg[i]) << i;
    }
    EXPECT_GT(nans, 20);  // the case exercises NaN windows
}

TEST(ConvOps, Relu) {
    auto x = randn(1000 * 33 + 5, 300);  // several OpenMP blocks and a tail
    x[3] = 0.0f;
    x[4] = kNaN;
    auto dout = randn(x.size(), 301);
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<float> out(x.size(), kNaN), dx(x.size(), kNaN);
    relu_forward(Tensor(out.data(), {n}), Tensor(x.data(), {n}));
    relu_backward(Tensor(dx.data(), {n}), Tensor(dout.data(), {n}), Tensor(out.data(), {n}));
    for (size_t i = 0; i < x.size(); i++) {
        if (std::isnan(x[i])) {
            EXPECT_TRUE(std::isnan(out[i]));
            continue;
        }
        ASSERT_EQ(out[i], x[i] > 0.0f ? x[i] : 0.0f) << i;
        ASSERT_EQ(dx[i], x[i] > 0.0f ? dout[i] : 0.0f) << i;  // the gradient at 0 is 0, as torch's
    }
    // In place, forward and backward.
    std::vector<float> y = x, g = dout;
    relu_forward(Tensor(y.data(), {n}), Tensor(y.data(), {n}));
    relu_backward(Tensor(g.data(), {n}), Tensor(g.data(), {n}), Tensor(y.data(), {n}));
    EXPECT_EQ(std::vector<float>(y.begin(), y.begin() + 4), std::vector<float>(out.begin(), out.begin() + 4));
    EXPECT_EQ(g, dx);
}

// trainer.precision: bf16 on the CPU: the convolution's three GEMMs take bf16 operands with fp32 accumulation
// (kernels/cpu/matmul.h; native on AVX512_BF16, emulated elsewhere with the same numerics). A product of two
// bf16 values is exact in fp32, so against the fp64 reference on the operands rounded to bf16 (x, w, dout)
// only fp32 summation remains (up to B*OH*OW = 3136 terms for dweight, ~3e-6 typical): kTol as in fp32. dbias is a
// plain fp32 column sum of the unrounded dout (kTol against the unrounded reference). Against the unrounded reference
// out, dinp and dweight are off by ~2^-9 relative (the rounding happens): more than 1e-4. A K = 9 layer (1 channel)
// stays fp32: the unrounded reference at kTol.
TEST(ConvOps, Conv2dBf16GemmsMatchRoundedReference) {
    struct Fp32Again {
        ~Fp32Again() { set_cpu_gemm_precision(DType::kF32); }
    } restore;
    set_cpu_gemm_precision(DType::kBF16);
    auto round = [](std::vector<float> v) {
        for (auto& x : v) x = float_from_bf16(bf16_from_float(x));
        return v;
    };
    uint32_t seed = 900;
    for (const ref::ConvDims& d :
         {ref::ConvDims{4, 28, 28, 1, 32, 3, 3, 1, 1}, ref::ConvDims{2, 14, 14, 32, 64, 3, 3, 1, 1},
          ref::ConvDims{2, 9, 8, 3, 5, 3, 3, 2, 0}}) {
        SCOPED_TRACE(testing::Message() << "H=" << d.H << " C=" << d.C << " OC=" << d.OC);
        const int OH = d.OH(), OW = d.OW(), K = d.kh * d.kw * d.C;
        auto x = randn(static_cast<size_t>(d.B) * d.H * d.W * d.C, seed++);
        auto w = randn(static_cast<size_t>(d.OC) * K, seed++, 0.3f);
        auto bias = randn(d.OC, seed++);
        auto dout = randn(static_cast<size_t>(d.B) * OH * OW * d.OC, seed++);
        std::vector<float> out(dout.size(), kNaN), cols(static_cast<size_t>(d.B) * OH * OW * K, kNaN);
        std::vector<float> dx(x.size(), kNaN), dw(w.size(), 0.0f), db(d.OC, 0.0f);
        const Conv2dGeom g{d.kh, d.kw, d.stride, d.pad};
        const Tensor tcols(cols.data(), {int64_t{d.B} * OH * OW, K});
        conv2d_forward(t4(out, d.B, OH, OW, d.OC), tcols, t4(x, d.B, d.H, d.W, d.C), t4(w, d.OC, d.kh, d.kw, d.C),
                       Tensor(bias.data(), {d.OC}), g);
        conv2d_backward(t4(dx, d.B, d.H, d.W, d.C), t4(dw, d.OC, d.kh, d.kw, d.C), Tensor(db.data(), {d.OC}),
                        t4(dout, d.B, OH, OW, d.OC), tcols, t4(x, d.B, d.H, d.W, d.C), t4(w, d.OC, d.kh, d.kw, d.C),
                        g);
        std::vector<double> rout, rdx, rdw, rdb, eout, edx, edw, edb;
        ref::conv2d_forward(rout, cast<double>(round(x)), cast<double>(round(w)), cast<double>(bias), d);
        ref::conv2d_backward(rdx, rdw, rdb, cast<double>(round(dout)), cast<double>(round(x)), cast<double>(round(w)),
                             d);
        ref::conv2d_forward(eout, cast<double>(x), cast<double>(w), cast<double>(bias), d);
        ref::conv2d_backward(edx, edw, edb, cast<double>(dout), cast<double>(x), cast<double>(w), d);
        EXPECT_LT(rel_err(db, edb), kTol);
        if (K < 16) {  // kept in fp32 (cpu/conv2d.cpp): the unrounded reference
            EXPECT_LT(rel_err(out, eout), kTol);
            EXPECT_LT(rel_err(dw, edw), kTol);
            continue;
        }
        EXPECT_LT(rel_err(out, rout), kTol);
        EXPECT_LT(rel_err(dx, rdx), kTol);
        EXPECT_LT(rel_err(dw, rdw), kTol);
        EXPECT_GT(rel_err(out, eout), 1e-4);
        EXPECT_GT(rel_err(dx, edx), 1e-4);
        EXPECT_GT(rel_err(dw, edw), 1e-4);
    }
}

// Pixel normalisation is a table lookup: every byte maps to its table entry exactly, on a size that
// spans several OpenMP blocks (the parallel branch) and on a small one.
TEST(ImageInput, NormalizePixelsLooksUpTheTable) {
    std::vector<float> table(256);
    for (int p = 0; p < 256; p++)
        table[static_cast<size_t>(p)] = static_cast<float>(p) * (1.f / (255.f * 0.35f)) - 0.29f;
    for (const int64_t n : {int64_t{5}, int64_t{200001}}) {
        std::vector<int32_t> px(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; i++) px[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % 256);
        std::vector<float> out(px.size(), kNaN);
        normalize_pixels(Tensor(out.data(), {n}), Tensor(px.data(), {n}, DType::kI32), table.data());
        for (size_t i = 0; i < px.size(); i++) ASSERT_EQ(out[i], table[static_cast<size_t>(px[i])]) << i;
    }
    std::vector<float> out(3);
    std::vector<int32_t> px(4);
    EXPECT_THROW(normalize_pixels(Tensor(out.data(), {3}), Tensor(px.data(), {4}, DType::kI32), table.data()),
                 InternalError);
}

// classifier_predict: the first maximum per row (ties included), the padding columns beyond V never
// chosen, and the loss summed over labelled rows only, in double (hi + lo recovers it to 1e-14).
TEST(ImageInput, ClassifierPredictArgmaxAndLossSum) {
    const int B = 5, V = 4, Vp = 6;
    std::vector<float> logits = {
        0, 1, 2, 3, 9, 9,   // 3 (padding 9s ignored)
        5, 5, 1, 5, 0, 0,   // tie: the first, 0
        -1, -2, -3, -4, 0, 0,  // 0
        1, 7, 7, 2, 0, 0,   // tie: 1
        -5, -5, -5, -4.5f, 0, 0,  // 3
    };
    std::vector<float> losses = {0.25f, 1.5f, 1e8f, 0.125f, 3.0e-7f};
    std::vector<int32_t> targets = {3, 0, -1, 2, 1}, preds(B, -9);
    std::vector<float> sum(2, kNaN);
    classifier_predict(Tensor(preds.data(), {B}, DType::kI32), Tensor(sum.data(), {2}), Tensor(logits.data(), {B, Vp}),
                       Tensor(losses.data(), {B}), Tensor(targets.data(), {B}, DType::kI32), V);
    EXPECT_EQ(preds, (std::vector<int32_t>{3, 0, 0, 1, 3}));
    const double want = 0.25 + 1.5 + 0.125 + static_cast<double>(3.0e-7f);  // row 2 has no label
    EXPECT_NEAR(static_cast<double>(sum[0]) + sum[1], want, 1e-14 * want);
    EXPECT_EQ(sum[0], static_cast<float>(want));
}

}  // namespace
}  // namespace llmt::kernels
