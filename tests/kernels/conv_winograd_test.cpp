// The CPU's Winograd F(2x2, 3x3) convolution (kernels/cpu/conv2d_winograd.h), through kernels/ops.h as the
// model calls it: every 3x3 stride-1 pad-1 layer with C >= 8 in fp32 takes this path (asserted per case, so the
// cases cannot drift onto im2col). Against the fp64 direct loops of ref_conv.h on the CNN's second layer, odd
// sizes (partial 2x2 tiles at the bottom and right), a channel count off the SIMD width, a 2x3 image and a
// batch of several chunks with a partial last one; the grad conventions (dinp written over NaN poison;
// dweight, dbias +=); the results bit-identical on 1 and 2 threads (chunks are fixed by B and the shape).
// Tolerance: kTol = 2e-5 relative to the output's scale, as conv_test.cpp's for im2col. The transforms add
// or halve at most 16 values per point (their coefficients are 0, +-1, +-1/2), so Winograd's fp32 error stays
// within a small factor of a direct sum's ~1e-6 (PyTorch's reference test measures 2-4e-7 at 14x14x32 -> 64);
// an index or transform mistake is off by order 1.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/conv2d_winograd.h"
#include "kernels/ops.h"
#include "ref_conv.h"
#include "test_util.h"

namespace llmt::kernels {
namespace {

using test::cast;
using test::randn;
using test::rel_err;
constexpr double kTol = 2e-5;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor t4(std::vector<float>& v, int64_t a, int64_t b, int64_t c, int64_t d) { return Tensor(v.data(), {a, b, c, d}); }

ConvShape shape_of(const ref::ConvDims& d) {
    return {d.B, d.H, d.W, d.C, d.OH(), d.OW(), d.OC, Conv2dGeom{d.kh, d.kw, d.stride, d.pad}};
}

struct Results {
    std::vector<float> out, dx, dw, db;
};

// Forward then backward through ops.h; dweight and dbias start at 0.5 and -0.25 (they accumulate), dinp at NaN
// (it is written), or no dinp / no bias when asked.
Results run_conv(const ref::ConvDims& d, uint32_t seed, bool with_dinp, bool with_bias) {
    const int OH = d.OH(), OW = d.OW(), K = 9 * d.C;
    const auto x = randn(static_cast<size_t>(d.B) * d.H * d.W * d.C, seed);
    const auto w = randn(static_cast<size_t>(d.OC) * K, seed + 1, 0.3f);
    const auto bias = randn(d.OC, seed + 2);
    const auto dout = randn(static_cast<size_t>(d.B) * OH * OW * d.OC, seed + 3);
    auto xv = x, wv = w, bv = bias, dv = dout;
    Results r{std::vector<float>(dout.size(), kNaN), std::vector<float>(x.size(), kNaN),
              std::vector<float>(w.size(), 0.5f), std::vector<float>(d.OC, -0.25f)};
    std::vector<float> cols(static_cast<size_t>(d.B) * OH * OW * K, kNaN);
    const Tensor tcols(cols.data(), {int64_t{d.B} * OH * OW, K});
    const Conv2dGeom g{3, 3, 1, 1};
    conv2d_forward(t4(r.out, d.B, OH, OW, d.OC), tcols, t4(xv, d.B, d.H, d.W, d.C), t4(wv, d.OC, 3, 3, d.C),
                   with_bias ? Tensor(bv.data(), {d.OC}) : Tensor(), g);
    conv2d_backward(with_dinp ? t4(r.dx, d.B, d.H, d.W, d.C) : Tensor(), t4(r.dw, d.OC, 3, 3, d.C),
                    with_bias ? Tensor(r.db.data(), {d.OC}) : Tensor(), t4(dv, d.B, OH, OW, d.OC), tcols,
                    t4(xv, d.B, d.H, d.W, d.C), t4(wv, d.OC, 3, 3, d.C), g);
    return r;
}

void expect_matches_reference(const ref::ConvDims& d, uint32_t seed, bool with_dinp, bool with_bias) {
    ASSERT_TRUE(cpu::winograd_applies(shape_of(d)));
    const Results r = run_conv(d, seed, with_dinp, with_bias);
    const auto x = cast<double>(randn(static_cast<size_t>(d.B) * d.H * d.W * d.C, seed));
    const auto w = cast<double>(randn(static_cast<size_t>(d.OC) * 9 * d.C, seed + 1, 0.3f));
    const auto bias = with_bias ? cast<double>(randn(d.OC, seed + 2)) : std::vector<double>{};
    const auto dout = cast<double>(randn(static_cast<size_t>(d.B) * d.OH() * d.OW() * d.OC, seed + 3));
    std::vector<double> rout, rdx, rdw, rdb;
    ref::conv2d_forward(rout, x, w, bias, d);
    ref::conv2d_backward(rdx, rdw, rdb, dout, x, w, d);
    for (auto& v : rdw) v += 0.5;
    for (auto& v : rdb) v -= 0.25;
    EXPECT_LT(rel_err(r.out, rout), kTol);
    EXPECT_LT(rel_err(r.dw, rdw), kTol);
    if (with_dinp) {
        EXPECT_LT(rel_err(r.dx, rdx), kTol);
    }
    if (with_bias) {
        EXPECT_LT(rel_err(r.db, rdb), kTol);
    }
}

TEST(ConvWinograd, MatchesReference) {
    uint32_t seed = 300;
    for (const ref::ConvDims& d : {
             ref::ConvDims{2, 14, 14, 32, 64, 3, 3, 1, 1},  // the CNN's second layer
             ref::ConvDims{3, 7, 5, 8, 5, 3, 3, 1, 1},      // odd H and W: the last tile row/column half outside
             ref::ConvDims{2, 2, 3, 9, 3, 3, 3, 1, 1},      // the smallest image; C = 9: a SIMD tail
             ref::ConvDims{9, 28, 28, 16, 4, 3, 3, 1, 1},   // 196 tiles per image: several chunks, the last partial
         }) {
        SCOPED_TRACE(testing::Message() << "B=" << d.B << " H=" << d.H << " W=" << d.W << " C=" << d.C
                                        << " OC=" << d.OC);
        expect_matches_reference(d, seed, /*with_dinp=*/true, /*with_bias=*/true);
        seed += 4;
    }
}

TEST(ConvWinograd, WithoutInputGradOrBias) {
    expect_matches_reference({3, 6, 9, 16, 7, 3, 3, 1, 1}, 400, /*with_dinp=*/false, /*with_bias=*/false);
}

// Where it does not apply: 1 channel (the first layer's K = 9 GEMM), stride 2, padding 0, a 1-row image.
TEST(ConvWinograd, AppliesOnlyToStride1Pad1WithChannels) {
    EXPECT_TRUE(cpu::winograd_applies(shape_of({2, 14, 14, 32, 64, 3, 3, 1, 1})));
    EXPECT_FALSE(cpu::winograd_applies(shape_of({2, 28, 28, 1, 32, 3, 3, 1, 1})));
    EXPECT_FALSE(cpu::winograd_applies(shape_of({2, 14, 14, 32, 64, 3, 3, 2, 1})));
    EXPECT_FALSE(cpu::winograd_applies(shape_of({2, 14, 14, 32, 64, 3, 3, 1, 0})));
    EXPECT_FALSE(cpu::winograd_applies(shape_of({2, 1, 14, 32, 64, 3, 3, 1, 1})));
    EXPECT_FALSE(cpu::winograd_applies(shape_of({2, 14, 14, 32, 64, 5, 5, 1, 1})));
}

// Chunks are fixed by B and the shape and each runs on one thread, so 1 and 2 threads give the same bits
// (training's exact resume and DDP comparisons rely on a run not depending on the scheduler).
TEST(ConvWinograd, SameBitsOnOneAndTwoThreads) {
    const ref::ConvDims d{41, 14, 14, 32, 16, 3, 3, 1, 1};  // several chunks, the last partial
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const Results one = run_conv(d, 500, true, true);
    omp_set_num_threads(2);
    const Results two = run_conv(d, 500, true, true);
    omp_set_num_threads(saved);
    EXPECT_EQ(one.out, two.out);
    EXPECT_EQ(one.dx, two.dx);
    EXPECT_EQ(one.dw, two.dw);
    EXPECT_EQ(one.db, two.db);
}

}  // namespace
}  // namespace llmt::kernels
