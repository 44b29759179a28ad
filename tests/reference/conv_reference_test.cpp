// The image ops of kernels/ops.h (conv2d, maxpool2d, relu) and the classifier at an image model's shapes
// (T = 1, V = Vp = 10) against PyTorch: tools/ref/conv_ref.py permutes our NHWC activations and (OC,KH,KW,C)
// weights to torch's layouts, runs F.conv2d / F.max_pool2d / F.relu / F.cross_entropy in float64 with
// autograd from the same fp32 inputs this test writes (fixed seeds), and permutes the results back.
// Cases: MNIST's CNN layers (28x28x1 -> 32 and 14x14x32 -> 64, 3x3 pad 1) at B = 2, odd sizes, stride 2,
// padding 0/1, C = 1 and C = 32; pooling on odd sizes (floor), with ties (torch keeps the first maximum).
// Tolerance: relative error (max |ours - torch| / max |torch|) < 1e-4, the fp32 bound of the other reference
// tests; our fp32 sums of <= 1568 products stay near 1e-6, so an index or layout mistake cannot hide.
// Pooling and ReLU only move values: equal to torch's exactly, the pooling indices too (pooling's dinp within
// kTol: overlapping windows sum their gradients).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "support/compare.h"
#include "support/unique_temp_dir.h"

namespace fs = std::filesystem;

namespace llmt::kernels {
namespace {

struct ConvCase {
    int B, H, W, C, OC, kh, kw, stride, pad;
    int OH() const { return static_cast<int>(conv_out_extent(H, kh, stride, pad)); }
    int OW() const { return static_cast<int>(conv_out_extent(W, kw, stride, pad)); }
};
struct PoolCase {
    int B, H, W, C, k, stride;
    int OH() const { return (H - k) / stride + 1; }
    int OW() const { return (W - k) / stride + 1; }
};
const std::vector<ConvCase> kConv = {
    {2, 28, 28, 1, 32, 3, 3, 1, 1}, {2, 14, 14, 32, 64, 3, 3, 1, 1}, {2, 9, 7, 3, 5, 3, 3, 2, 0},
    {1, 8, 11, 32, 6, 3, 3, 2, 1},  {3, 5, 6, 1, 4, 3, 3, 1, 0},
};
const std::vector<PoolCase> kPool = {{2, 28, 28, 32, 2, 2}, {2, 7, 9, 3, 2, 2}, {1, 9, 8, 1, 3, 2}};
constexpr int kReluN = 4099, kClsB = 37, kClsV = 10;
constexpr double kTol = 1e-4;

class Ref {
public:
    static Ref& get() {
        static Ref r;
        return r;
    }
    std::vector<float>& in(const std::string& name) { return f32_.at(name); }
    std::vector<int32_t>& ids(const std::string& name) { return i32_.at(name); }
    template <typename T = double>
    std::vector<T> out(const std::string& name) const {
        const fs::path p = dir_ / ("ref_" + name + ".bin");
        std::ifstream f(p, std::ios::binary);
        if (!f) throw std::runtime_error("missing reference output " + p.string());
        std::vector<T> v(fs::file_size(p) / sizeof(T));
        f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
        return v;
    }
    bool ok() const { return ok_; }
    Ref(const Ref&) = delete;
    Ref& operator=(const Ref&) = delete;

private:
    Ref() : tmp_("llmt_conv_ref"), dir_(tmp_.path()) {
        std::string conv_json, pool_json;
        for (size_t i = 0; i < kConv.size(); i++) {
            const ConvCase& c = kConv[i];
            const std::string n = fmt::format("conv{}_", i);
            randn(n + "x", static_cast<size_t>(c.B) * c.H * c.W * c.C, 1.0f);
            randn(n + "w", static_cast<size_t>(c.OC) * c.kh * c.kw * c.C, 0.2f);
            randn(n + "b", c.OC, 1.0f);
            randn(n + "dout", static_cast<size_t>(c.B) * c.OH() * c.OW() * c.OC, 1.0f);
            conv_json += fmt::format("{}[{},{},{},{},{},{},{},{},{}]", i ? "," : "", c.B, c.H, c.W, c.C, c.OC, c.kh,
                                     c.kw, c.stride, c.pad);
        }
        for (size_t i = 0; i < kPool.size(); i++) {
            const PoolCase& c = kPool[i];
            const std::string n = fmt::format("pool{}_", i);
            randn(n + "x", static_cast<size_t>(c.B) * c.H * c.W * c.C, 1.0f);
            auto& x = f32_[n + "x"];
            for (size_t j = 0; j < x.size(); j += 5) x[j] = std::round(x[j]);  // ties: torch keeps the first
            write(n + "x", x.data(), x.size() * sizeof(float));
            randn(n + "dout", static_cast<size_t>(c.B) * c.OH() * c.OW() * c.C, 1.0f);
            pool_json += fmt::format("{}[{},{},{},{},{},{}]", i ? "," : "", c.B, c.H, c.W, c.C, c.k, c.stride);
        }
        randn("relu_x", kReluN, 1.0f);
        f32_["relu_x"][7] = 0.0f;  // the gradient at 0 is 0 in torch
        write("relu_x", f32_["relu_x"].data(), kReluN * sizeof(float));
        randn("relu_dout", kReluN, 1.0f);
        randn("cls_logits", kClsB * kClsV, 3.0f);
        {
            std::mt19937 rng(seed_++);
            std::uniform_int_distribution<int32_t> d(0, kClsV - 1);
            std::vector<int32_t> t(kClsB);
            for (auto& v : t) v = d(rng);
            i32_["cls_targets"] = t;
            write("cls_targets", t.data(), t.size() * sizeof(int32_t));
        }
        std::ofstream(dir_ / "config.json")
            << fmt::format(R"({{"conv": [{}], "pool": [{}], "relu_n": {}, "cls": [{}, {}]}})", conv_json, pool_json,
                           kReluN, kClsB, kClsV);
        const std::string cmd = "/usr/bin/python3 " LLMT_SOURCE_DIR "/tools/ref/conv_ref.py " + dir_.string();
        ok_ = std::system(cmd.c_str()) == 0;
    }
    void randn(const std::string& name, size_t n, float scale) {
        std::mt19937 rng(seed_++);
        std::normal_distribution<float> d(0.0f, scale);
        std::vector<float> v(n);
        for (auto& x : v) x = d(rng);
        f32_[name] = v;
        write(name, v.data(), n * sizeof(float));
    }
    void write(const std::string& name, const void* data, size_t bytes) {
        std::ofstream f(dir_ / (name + ".bin"), std::ios::binary);
        f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    }

    llmt::testing::UniqueTempDir tmp_;  // removed at exit
    fs::path dir_;
    uint32_t seed_ = 4321;
    bool ok_ = false;
    std::map<std::string, std::vector<float>> f32_;
    std::map<std::string, std::vector<int32_t>> i32_;
};

double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
    if (!support::expect_comparable(a, b, "rel_err")) return support::not_comparable();
    double num = 0.0, den = 1e-30;
    for (size_t i = 0; i < a.size(); i++) {
        num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
        den = std::max(den, std::fabs(b[i]));
    }
    return num / den;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::string& name) {
    const double e = rel_err(got, want);
    std::printf("  %-14s rel err %.2e\n", name.c_str(), e);
    EXPECT_LT(e, kTol) << name;
}

class ConvReference : public ::testing::Test {
protected:
    void SetUp() override {
        if (!Ref::get().ok()) GTEST_FAIL() << "tools/ref/conv_ref.py failed (needs /usr/bin/python3 with torch)";
    }
    Ref& r = Ref::get();
};

Tensor t4(std::vector<float>& v, int a, int b, int c, int d) { return Tensor(v.data(), {a, b, c, d}); }

TEST_F(ConvReference, Conv2d) {
    for (size_t i = 0; i < kConv.size(); i++) {
        const ConvCase& c = kConv[i];
        const std::string n = fmt::format("conv{}_", i);
        SCOPED_TRACE(n);
        const int K = c.kh * c.kw * c.C, OH = c.OH(), OW = c.OW();
        std::vector<float> out(static_cast<size_t>(c.B) * OH * OW * c.OC),
            cols(static_cast<size_t>(c.B) * OH * OW * K);
        std::vector<float> dx(r.in(n + "x").size()), dw(r.in(n + "w").size(), 0.0f), db(c.OC, 0.0f);
        const Tensor x = t4(r.in(n + "x"), c.B, c.H, c.W, c.C), w = t4(r.in(n + "w"), c.OC, c.kh, c.kw, c.C);
        const Tensor tcols(cols.data(), {int64_t{c.B} * OH * OW, K});
        const Conv2dGeom g{c.kh, c.kw, c.stride, c.pad};
        conv2d_forward(t4(out, c.B, OH, OW, c.OC), tcols, x, w, Tensor(r.in(n + "b").data(), {c.OC}), g);
        conv2d_backward(t4(dx, c.B, c.H, c.W, c.C), t4(dw, c.OC, c.kh, c.kw, c.C), Tensor(db.data(), {c.OC}),
                        t4(r.in(n + "dout"), c.B, OH, OW, c.OC), tcols, x, w, g);
        expect_close(out, r.out(n + "out"), n + "out");
        expect_close(dx, r.out(n + "dx"), n + "dx");
        expect_close(dw, r.out(n + "dw"), n + "dw");
        expect_close(db, r.out(n + "db"), n + "db");
    }
}

TEST_F(ConvReference, MaxPool2d) {
    for (size_t i = 0; i < kPool.size(); i++) {
        const PoolCase& c = kPool[i];
        const std::string n = fmt::format("pool{}_", i);
        SCOPED_TRACE(n);
        std::vector<float> out(static_cast<size_t>(c.B) * c.OH() * c.OW() * c.C), dx(r.in(n + "x").size());
        std::vector<int32_t> arg(out.size());
        const Tensor targ(arg.data(), {c.B, c.OH(), c.OW(), c.C}, DType::kI32);
        maxpool2d_forward(t4(out, c.B, c.OH(), c.OW(), c.C), targ, t4(r.in(n + "x"), c.B, c.H, c.W, c.C), c.k,
                          c.stride);
        maxpool2d_backward(t4(dx, c.B, c.H, c.W, c.C), t4(r.in(n + "dout"), c.B, c.OH(), c.OW(), c.C), targ, c.k,
                           c.stride);
        const auto want_out = r.out(n + "out"), want_dx = r.out(n + "dx");
        EXPECT_EQ(std::vector<double>(out.begin(), out.end()), want_out);
        // Overlapping windows (k 3, stride 2) add up to 4 gradients: fp32 sums against torch's fp64 ones.
        expect_close(dx, want_dx, n + "dx");
        EXPECT_EQ(arg, r.out<int32_t>(n + "idx"));  // torch's return_indices: ih * W + iw within the image
    }
}

TEST_F(ConvReference, Relu) {
    std::vector<float> out(kReluN), dx(kReluN);
    relu_forward(Tensor(out.data(), {kReluN}), Tensor(r.in("relu_x").data(), {kReluN}));
    relu_backward(Tensor(dx.data(), {kReluN}), Tensor(r.in("relu_dout").data(), {kReluN}),
                  Tensor(out.data(), {kReluN}));
    EXPECT_EQ(std::vector<double>(out.begin(), out.end()), r.out("relu_out"));
    EXPECT_EQ(std::vector<double>(dx.begin(), dx.end()), r.out("relu_dx"));
}

// classifier_forward_backward at T = 1 with V = Vp = 10 (no padding columns): torch's mean cross-entropy.
TEST_F(ConvReference, ClassifierTenClasses) {
    std::vector<float> logits = r.in("cls_logits"), losses(kClsB), fwd_losses(kClsB);
    const Tensor tgt(r.ids("cls_targets").data(), {kClsB, 1}, DType::kI32);
    classifier_forward(Tensor(fwd_losses.data(), {kClsB, 1}), Tensor(logits.data(), {kClsB, 1, kClsV}), tgt, kClsV);
    classifier_forward_backward(Tensor(losses.data(), {kClsB, 1}), Tensor(logits.data(), {kClsB, 1, kClsV}), tgt,
                                1.0f / kClsB, kClsV);
    expect_close(fwd_losses, r.out("cls_losses"), "cls_losses");
    expect_close(losses, r.out("cls_losses"), "cls_losses_fb");
    expect_close(logits, r.out("cls_dlogits"), "cls_dlogits");
}

}  // namespace
}  // namespace llmt::kernels
