// The CUDA image ops (kernels/ops.h conv2d, maxpool2d, relu) against the CPU ops (which
// conv_reference_test checks against PyTorch), fp32 and bf16, on fresh random inputs (seed printed; replay
// with LLMT_TEST_SEED). Outputs the ops overwrite are NaN-poisoned first. bf16 inputs are rounded to bf16
// and the CPU op runs on the same rounded values, so only the kernels' own rounding differs. Label `gpu`:
// skipped, saying so, without a CUDA device. Cases: MNIST's CNN layers (28x28x1 -> 32, 14x14x32 -> 64, 3x3
// pad 1), odd sizes with stride 2 and pad 0, the first layer's calls
// (no bias, no input gradient), pooling with odd sizes and overlapping windows.
// Tolerances (relative to max |cpu|), as cuda_ops_test.cpp and cuda_ops_test_bf16.cpp argue them: fp32 sums
// of <= 288 products (forward) or <= B*OH*OW = 1568 (dweight) in another order: 2e-5 forward, 5e-5
// backward (TF32 would be ~1e-3). bf16: outputs rounded once (2^-9 relative) 1e-2; dinp goes through dcols
// rounded to bf16 and summed, dweight/dbias sum many rounded gradients: 2e-2. Pooling and ReLU move values:
// exact, argmax too. gather_images (the classifier's input from a byte table) is exact too.
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
#include "kernels/device_tensor.h"
#include "kernels/ops.h"
#include "kernels/test_util.h"

namespace llmt::kernels {
namespace {

using test::randn;
using test::rel_err;

uint32_t base_seed() {
    static const uint32_t s = [] {
        const char* e = std::getenv("LLMT_TEST_SEED");
        const uint32_t v = e ? static_cast<uint32_t>(std::strtoul(e, nullptr, 10)) : std::random_device{}();
        std::printf("[conv-cuda-vs-cpu] seed %u (replay with LLMT_TEST_SEED=%u)\n", v, v);
        return v;
    }();
    return s;
}
uint32_t seed(uint32_t k) { return base_seed() * 7919u + k; }

std::vector<float> rounded(std::vector<float> v) {
    for (auto& x : v) x = float_from_bf16(bf16_from_float(x));
    return v;
}

using Dev = test::DeviceTensor;

Dev dev(const std::vector<float>& v, std::vector<int64_t> shape, DType dt) {
    Dev d(std::move(shape), dt);
    d.upload(v);
    return d;
}

void expect_close(const std::string& what, const std::vector<float>& gpu, const std::vector<float>& cpu, double tol) {
    const double e = rel_err(gpu, cpu);
    bool finite = true;
    for (float x : gpu) finite = finite && std::isfinite(x);
    std::printf("[conv-cuda-vs-cpu] %-36s max rel err %.3e (tol %.0e)\n", what.c_str(), e, tol);
    EXPECT_TRUE(finite) << what << ": non-finite value (an element left unwritten?)";
    EXPECT_LE(e, tol) << what;
}

struct ConvCase {
    int B, H, W, C, OC, kh, kw, stride, pad;
};
const std::vector<ConvCase> kConv = {
    {4, 28, 28, 1, 32, 3, 3, 1, 1}, {4, 14, 14, 32, 64, 3, 3, 1, 1}, {3, 9, 7, 3, 5, 3, 3, 2, 0},
    {2, 8, 11, 32, 6, 3, 3, 2, 1},  {2, 6, 5, 4, 7, 5, 3, 2, 2},
};
struct PoolCase {
    int B, H, W, C, k, stride;
};
// C % 4 == 0 takes the float4 kernels in fp32 (kernels/cuda/conv.cu), the others the scalar ones.
const std::vector<PoolCase> kPool = {
    {4, 28, 28, 32, 2, 2}, {3, 7, 9, 3, 2, 2}, {2, 9, 8, 5, 3, 2}, {2, 9, 8, 8, 3, 2}};

const Conv2dGeom kConv3x3Geom{3, 3, 1, 1};

struct Tol {
    double out, grad;
};

// first_layer: no bias, no input gradient, no bias gradient (the calls of a model's first convolution).
void check_conv(DType dt, Tol tol, bool first_layer = false, bool tf32 = false) {
    uint32_t k = dt == DType::kBF16 ? 1000 : 0;
    const bool bf = dt == DType::kBF16;
    auto maybe_round = [&](std::vector<float> v) { return bf ? rounded(std::move(v)) : v; };
    for (const ConvCase& c : kConv) {
        const std::string name = std::string(bf     ? "bf16 "
                                             : tf32 ? "tf32 "
                                                    : "fp32 ") +
                                 std::to_string(c.H) + "x" + std::to_string(c.W) + "x" + std::to_string(c.C) + "->" +
                                 std::to_string(c.OC) + " s" + std::to_string(c.stride) + " p" + std::to_string(c.pad);
        const Conv2dGeom g{c.kh, c.kw, c.stride, c.pad};
        const int64_t OH = conv_out_extent(c.H, c.kh, c.stride, c.pad),
                      OW = conv_out_extent(c.W, c.kw, c.stride, c.pad);
        const int64_t K = int64_t{c.kh} * c.kw * c.C, rows = c.B * OH * OW;
        auto x = maybe_round(randn(static_cast<size_t>(c.B) * c.H * c.W * c.C, seed(k++)));
        auto w = maybe_round(randn(static_cast<size_t>(c.OC * K), seed(k++), 0.2f));
        auto b = maybe_round(randn(c.OC, seed(k++)));
        auto dout = maybe_round(randn(static_cast<size_t>(rows * c.OC), seed(k++)));
        // CPU
        std::vector<float> out(dout.size()), cols(static_cast<size_t>(rows * K)), dx(x.size()), dw(w.size(), 0.5f),
            db(c.OC, 0.25f);
        const Tensor hx(x.data(), {c.B, c.H, c.W, c.C}), hw(w.data(), {c.OC, c.kh, c.kw, c.C});
        auto opt = [&](Tensor t) { return first_layer ? Tensor() : t; };
        conv2d_forward(Tensor(out.data(), {c.B, OH, OW, c.OC}), Tensor(cols.data(), {rows, K}), hx, hw,
                       opt(Tensor(b.data(), {c.OC})), g);
        conv2d_backward(opt(Tensor(dx.data(), {c.B, c.H, c.W, c.C})), Tensor(dw.data(), {c.OC, c.kh, c.kw, c.C}),
                        opt(Tensor(db.data(), {c.OC})), Tensor(dout.data(), {c.B, OH, OW, c.OC}),
                        Tensor(cols.data(), {rows, K}), hx, hw, g);
        // GPU
        Dev gx = dev(x, {c.B, c.H, c.W, c.C}, dt), gw = dev(w, {c.OC, c.kh, c.kw, c.C}, dt), gb = dev(b, {c.OC}, dt);
        Dev gout({c.B, OH, OW, c.OC}, dt), gcols({rows, K}, dt), gdx({c.B, c.H, c.W, c.C}, dt);
        Dev gdout = dev(dout, {c.B, OH, OW, c.OC}, dt);
        Dev gdw = dev(std::vector<float>(w.size(), 0.5f), {c.OC, c.kh, c.kw, c.C}, DType::kF32);
        Dev gdb = dev(std::vector<float>(c.OC, 0.25f), {c.OC}, DType::kF32);
        gout.poison(), gcols.poison(), gdx.poison();
        conv2d_forward(gout.t(), gcols.t(), gx.t(), gw.t(), opt(gb.t()), g, tf32);
        expect_close(name + " out", gout.download(), out, tol.out);
        conv2d_backward(opt(gdx.t()), gdw.t(), opt(gdb.t()), gdout.t(), gcols.t(), gx.t(), gw.t(), g, tf32);
        if (!first_layer) expect_close(name + " dinp", gdx.download(), dx, tol.grad);
        expect_close(name + " dweight", gdw.download(), dw, tol.grad);
        if (!first_layer) expect_close(name + " dbias", gdb.download(), db, tol.grad);
    }
}

void check_pool_relu(DType dt) {
    uint32_t k = dt == DType::kBF16 ? 3000 : 2000;
    const bool bf = dt == DType::kBF16;
    for (const PoolCase& c : kPool) {
        const std::string name = std::string(bf ? "bf16 " : "fp32 ") + "maxpool " + std::to_string(c.H) + "x" +
                                 std::to_string(c.W) + " k" + std::to_string(c.k) + " s" + std::to_string(c.stride);
        const int64_t OH = (c.H - c.k) / c.stride + 1, OW = (c.W - c.k) / c.stride + 1;
        auto x = rounded(randn(static_cast<size_t>(c.B) * c.H * c.W * c.C, seed(k++)));  // bf16 values: ties too
        auto dout = rounded(randn(static_cast<size_t>(c.B * OH * OW * c.C), seed(k++)));
        std::vector<float> out(dout.size()), dx(x.size());
        std::vector<int32_t> arg(dout.size());
        const Tensor harg(arg.data(), {c.B, OH, OW, c.C}, DType::kI32);
        maxpool2d_forward(Tensor(out.data(), {c.B, OH, OW, c.C}), harg, Tensor(x.data(), {c.B, c.H, c.W, c.C}), c.k,
                          c.stride);
        maxpool2d_backward(Tensor(dx.data(), {c.B, c.H, c.W, c.C}), Tensor(dout.data(), {c.B, OH, OW, c.C}), harg,
                           c.k, c.stride);
        Dev gx = dev(x, {c.B, c.H, c.W, c.C}, dt), gdout = dev(dout, {c.B, OH, OW, c.C}, dt);
        Dev gout({c.B, OH, OW, c.C}, dt), gdx({c.B, c.H, c.W, c.C}, dt), garg({c.B, OH, OW, c.C}, DType::kI32);
        gout.poison(), gdx.poison(), garg.poison();
        maxpool2d_forward(gout.t(), garg.t(), gx.t(), c.k, c.stride);
        maxpool2d_backward(gdx.t(), gdout.t(), garg.t(), c.k, c.stride);
        EXPECT_EQ(gout.download(), out) << name;
        EXPECT_EQ(garg.download_ids(), arg) << name;
        // overlapping windows add up to 4 gradients; bf16 rounds that sum once
        expect_close(name + " dinp", gdx.download(), dx, bf ? 1e-2 : 1e-6);
    }
    const int64_t n = 70001;
    auto x = rounded(randn(n, seed(k++)));
    x[3] = 0.0f;
    auto dout = rounded(randn(n, seed(k++)));
    std::vector<float> out(n), dx(n);
    relu_forward(Tensor(out.data(), {n}), Tensor(x.data(), {n}));
    relu_backward(Tensor(dx.data(), {n}), Tensor(dout.data(), {n}), Tensor(out.data(), {n}));
    Dev gx = dev(x, {n}, dt), gdout = dev(dout, {n}, dt), gout({n}, dt);
    gout.poison();
    relu_forward(gout.t(), gx.t());
    relu_backward(gdout.t(), gdout.t(), gout.t());  // in place
    relu_forward(gx.t(), gx.t());                   // in place
    EXPECT_EQ(gout.download(), out);
    EXPECT_EQ(gx.download(), out);
    EXPECT_EQ(gdout.download(), dx);
}

// conv_pool_relu_forward (one fused 3xTF32 kernel on CUDA, cuda/conv_pool.h) against the CPU's three ops,
// plus conv2d_im2col (the cols a backward then needs). Cases: the presets' layers (28x28x1 -> 32,
// 14x14x32 -> 64), odd extents whose last row/column no window takes (7x7, 9x11), C not a multiple of 8,
// OC in 32-channel slices (96) and 64-channel ones (128), and a shape the kernel does not take (OC 5: the
// composed path, which writes cols and says so). pooled: 3xTF32 keeps fp32-level accuracy, sums of <= 9 C
// products in another order, so the fp32 conv tolerance (2e-5 of max |cpu|; measured up to 5e-6 on an
// H100, the tensor cores' accumulation rounding more than fp32 FMAs). TF32: operands rounded to 10
// mantissa bits (2^-11 relative each), sums of <= 576 such products: 4e-3 of max |cpu| (measured below
// 1e-3). argmax: equal, except where the two candidates' CPU convolution values are within that tolerance
// (a near-tie the other order may flip).
// Without keep_argmax the fused kernel leaves argmax alone (still the poison).
void check_conv_pool_relu(bool tf32) {
    struct Case {
        int B, H, W, C, OC;
        bool fused;
    };
    const Case cases[] = {{4, 28, 28, 1, 32, true},  {4, 14, 14, 32, 64, true}, {3, 7, 7, 64, 128, true},
                          {2, 14, 14, 32, 96, true}, {2, 9, 11, 3, 32, true},   {2, 8, 8, 4, 5, false}};
    uint32_t k = 7000;
    for (const Case& c : cases) {
        const double tol = tf32 ? 4e-3 : 2e-5;
        const std::string name = std::string(tf32 ? "tf32 " : "") + "conv_pool_relu " + std::to_string(c.H) + "x" +
                                 std::to_string(c.W) + "x" + std::to_string(c.C) + "->" + std::to_string(c.OC);
        const int64_t PH = c.H / 2, PW = c.W / 2, K = 9 * int64_t{c.C}, rows = int64_t{c.B} * c.H * c.W;
        auto x = randn(static_cast<size_t>(rows * c.C), seed(k++));
        auto w = randn(static_cast<size_t>(c.OC * K), seed(k++), 0.2f);
        auto b = randn(c.OC, seed(k++), 0.1f);
        std::vector<float> conv(static_cast<size_t>(rows * c.OC)), cols(static_cast<size_t>(rows * K)),
            pooled(static_cast<size_t>(c.B * PH * PW * c.OC));
        std::vector<int32_t> arg(pooled.size());
        const Tensor hx(x.data(), {c.B, c.H, c.W, c.C});
        conv2d_forward(Tensor(conv.data(), {c.B, c.H, c.W, c.OC}), Tensor(cols.data(), {rows, K}), hx,
                       Tensor(w.data(), {c.OC, 3, 3, c.C}), Tensor(b.data(), {c.OC}), kConv3x3Geom);
        maxpool2d_forward(Tensor(pooled.data(), {c.B, PH, PW, c.OC}),
                          Tensor(arg.data(), {c.B, PH, PW, c.OC}, DType::kI32),
                          Tensor(conv.data(), {c.B, c.H, c.W, c.OC}));
        const auto np = static_cast<int64_t>(pooled.size());
        relu_forward(Tensor(pooled.data(), {np}), Tensor(pooled.data(), {np}));
        Dev gx = dev(x, {c.B, c.H, c.W, c.C}, DType::kF32), gw = dev(w, {c.OC, 3, 3, c.C}, DType::kF32);
        Dev gb = dev(b, {c.OC}, DType::kF32), gconv({c.B, c.H, c.W, c.OC}, DType::kF32), gcols({rows, K}, DType::kF32);
        Dev gp({c.B, PH, PW, c.OC}, DType::kF32), garg({c.B, PH, PW, c.OC}, DType::kI32);
        for (const bool keep : {true, false}) {
            gp.poison(), garg.poison(), gcols.poison();
            const bool cols_ready = conv_pool_relu_forward(gp.t(), garg.t(), gconv.t(), gcols.t(), gx.t(), gw.t(),
                                                           gb.t(), kConv3x3Geom, keep, tf32);
            EXPECT_EQ(cols_ready, !c.fused) << name;
            expect_close(name + (keep ? " pooled" : " pooled, no argmax"), gp.download(), pooled, tol);
            const auto ga = garg.download_ids();
            if (!keep && c.fused) {
                EXPECT_EQ(ga, std::vector<int32_t>(ga.size(), -7)) << name << ": argmax written without keep_argmax";
                continue;
            }
            double scale = 0.0;
            for (float v : conv) scale = std::max(scale, std::fabs(static_cast<double>(v)));
            int flips = 0, wrong = 0;
            for (size_t i = 0; i < arg.size(); ++i) {
                if (ga[i] == arg[i]) continue;
                const size_t img = i / static_cast<size_t>(PH * PW * c.OC), ch = i % static_cast<size_t>(c.OC);
                const size_t plane = static_cast<size_t>(c.H * c.W);
                const bool in_window = ga[i] >= 0 && static_cast<size_t>(ga[i]) < plane;
                const double gap = in_window ? std::fabs(conv[(img * plane + static_cast<size_t>(ga[i])) * c.OC + ch] -
                                                         conv[(img * plane + static_cast<size_t>(arg[i])) * c.OC + ch])
                                             : 1e30;
                (gap <= tol * scale ? flips : wrong)++;
            }
            EXPECT_EQ(wrong, 0) << name << ": argmax differs beyond near-ties (" << flips << " near-tie flips)";
        }
        // The CPU's im2col of the same input (not conv2d_forward's cols: a Winograd layer keeps its
        // transformed tiles there, cpu/conv2d_winograd.h).
        std::vector<float> im2col_cpu(cols.size());
        conv2d_im2col(Tensor(im2col_cpu.data(), {rows, K}), hx, kConv3x3Geom);
        gcols.poison();
        conv2d_im2col(gcols.t(), gx.t(), kConv3x3Geom);
        EXPECT_EQ(gcols.download(), im2col_cpu) << name << " conv2d_im2col";
    }
}

// gather_images on the GPU against the CPU op (tests/data/image_gather_test.cpp checks that one against the
// augmented pixel path): the same table lookup per byte, so equal bit for bit.
void check_gather() {
    const int H = 28, W = 28, C = 1, n = 40, B = 33;
    const int64_t per = int64_t{H} * W * C;
    std::mt19937 rng(seed(4000));
    std::vector<uint8_t> pixels(static_cast<size_t>(n * per));
    for (auto& p : pixels) p = static_cast<uint8_t>(rng() & 255);
    std::vector<float> lut(256);
    for (int i = 0; i < 256; ++i) lut[static_cast<size_t>(i)] = (static_cast<float>(i) / 255.f - 0.2860f) / 0.3530f;
    std::vector<int32_t> refs;
    for (int b = 0; b < B; ++b)
        for (int v : {b == B - 1 ? -1 : static_cast<int>(rng() % n), static_cast<int>(rng() % 5) - 2,
                      static_cast<int>(rng() % 5) - 2, static_cast<int>(rng() & 1)})
            refs.push_back(v);
    std::vector<float> want(static_cast<size_t>(B * per));
    gather_images(Tensor(want.data(), {B, H, W, C}), ImageTable{pixels.data(), n, H, W, C},
                  Tensor(refs.data(), {B, 4}, DType::kI32), lut.data());
    Dev table({n * per / 4}, DType::kI32), grefs({B, 4}, DType::kI32), gout({B, H, W, C}, DType::kF32);
    upload_bytes(Device::kCuda, table.t().data, pixels.data(), pixels.size());
    upload_bytes(Device::kCuda, grefs.t().data, refs.data(), refs.size() * sizeof(int32_t));
    gout.poison();
    gather_images(gout.t(), ImageTable{static_cast<const uint8_t*>(table.t().data), n, H, W, C}, grefs.t(),
                  lut.data());
    EXPECT_EQ(gout.download(), want);
}

// Pixel normalisation: a table lookup, so the GPU's values equal the CPU's exactly (the table travels as
// the kernel's argument). classifier_predict: argmax ties (bf16-rounded random logits repeat values) and
// the loss sum, whose order differs (a block's tree vs a loop) but in double: 1e-12 relative.
void check_image_eval() {
    std::vector<float> table(256);
    for (int p = 0; p < 256; p++) table[static_cast<size_t>(p)] = static_cast<float>(p) / (255.f * 0.35f) - 0.8f;
    const int64_t n = 512 * 784 + 3;
    std::vector<int32_t> px(static_cast<size_t>(n));
    std::mt19937 rng(seed(5000));
    for (auto& p : px) p = static_cast<int32_t>(rng() % 256);
    std::vector<float> out(px.size());
    normalize_pixels(Tensor(out.data(), {n}), Tensor(px.data(), {n}, DType::kI32), table.data());
    Dev gpx({n}, DType::kI32), gout({n}, DType::kF32);
    copy(gpx.t(), Tensor(px.data(), {n}, DType::kI32));
    gout.poison();
    normalize_pixels(gout.t(), gpx.t(), table.data());
    EXPECT_EQ(gout.download(), out) << "normalize_pixels";

    for (const int B : {1, 37, 512, 1000}) {
        const int V = 10, Vp = 12;
        auto logits = rounded(randn(static_cast<size_t>(B) * Vp, seed(5001 + B), 0.05f));  // many ties
        auto losses = randn(B, seed(6001 + B));
        for (auto& l : losses) l = std::fabs(l);
        std::vector<int32_t> targets(static_cast<size_t>(B));
        for (int r = 0; r < B; r++)
            targets[static_cast<size_t>(r)] = r % 7 == 3 ? -1 : static_cast<int32_t>(rng() % V);
        std::vector<int32_t> preds(static_cast<size_t>(B));
        std::vector<float> sum(2);
        const Tensor ht(targets.data(), {B}, DType::kI32);
        classifier_predict(Tensor(preds.data(), {B}, DType::kI32), Tensor(sum.data(), {2}),
                           Tensor(logits.data(), {B, Vp}), Tensor(losses.data(), {B}), ht, V);
        Dev gl = dev(logits, {B, Vp}, DType::kF32), gloss = dev(losses, {B}, DType::kF32);
        Dev gt({B}, DType::kI32), gp({B}, DType::kI32), gs({2}, DType::kF32);
        copy(gt.t(), ht);
        gp.poison(), gs.poison();
        classifier_predict(gp.t(), gs.t(), gl.t(), gloss.t(), gt.t(), V);
        EXPECT_EQ(gp.download_ids(), preds) << "classifier_predict B " << B;
        const auto g = gs.download();
        const double want = static_cast<double>(sum[0]) + sum[1], got = static_cast<double>(g[0]) + g[1];
        EXPECT_NEAR(got, want, 1e-12 * want) << "classifier_predict loss sum B " << B;
    }
}

class CudaConv : public ::testing::Test {
protected:
    void SetUp() override {
        if (device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    }
};

TEST_F(CudaConv, Conv2dFp32) { check_conv(DType::kF32, {2e-5, 5e-5}); }
TEST_F(CudaConv, Conv2dBf16) { check_conv(DType::kBF16, {1e-2, 2e-2}); }
// trainer.conv_tf32: the im2col GEMMs on TF32 tensor cores; tolerances as the fused TF32 case argues.
TEST_F(CudaConv, Conv2dTf32) { check_conv(DType::kF32, {4e-3, 4e-3}, false, /*tf32=*/true); }
TEST_F(CudaConv, Conv2dFp32FirstLayer) { check_conv(DType::kF32, {2e-5, 5e-5}, /*first_layer=*/true); }
TEST_F(CudaConv, MaxPoolReluFp32) { check_pool_relu(DType::kF32); }
TEST_F(CudaConv, MaxPoolReluBf16) { check_pool_relu(DType::kBF16); }
TEST_F(CudaConv, ConvPoolReluFusedMatchesCpuOps) { check_conv_pool_relu(/*tf32=*/false); }
TEST_F(CudaConv, ConvPoolReluFusedTf32MatchesCpuOps) { check_conv_pool_relu(/*tf32=*/true); }
TEST_F(CudaConv, GatherImages) { check_gather(); }
TEST_F(CudaConv, NormalizePixelsAndPredictMatchCpu) { check_image_eval(); }

}  // namespace
}  // namespace llmt::kernels
