// The image classifiers (models/classifier.h) against PyTorch (tools/ref/classifier_ref.py, float64) on the
// same weights and batch: the loss and every parameter gradient of a tiny CNN and MLP; then finite
// differences of our own loss; the logits of an eval forward; the unlabelled padding rows weigh nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/rng.h"
#include "data/images/image_set.h"
#include "kernels/image_refs.h"
#include "models/classifier.h"
#include "support/subprocess.h"

namespace llmt::models {
namespace {

// conv_channels {8, 4}: the second convolution's 8 input channels take the CPU's Winograd path
// (kernels/cpu/conv2d_winograd.h), the first (1 channel) im2col.
ClassifierConfig tiny(bool conv, std::vector<int> conv_channels = {8, 4}) {
    ClassifierConfig c;
    c.conv = conv;
    c.H = c.W = conv ? 8 : 6;
    c.C = 1;
    c.classes = conv ? 4 : 3;
    if (conv) c.conv_channels = std::move(conv_channels);
    c.hidden = conv ? std::vector<int>{5} : std::vector<int>{7, 5};
    c.pixel_mean = 0.3f;
    c.pixel_std = 0.35f;
    return c;
}

struct Batch {
    int B = 5, T = 0;
    std::vector<int32_t> x, y;
};

// Random pixels; row 3 unlabelled (a padding row of a short last batch).
Batch make_batch(const ClassifierConfig& c) {
    Batch b;
    b.T = c.H * c.W * c.C;
    const CounterRng rng(7, 1);
    b.x.resize(static_cast<size_t>(b.B) * b.T);
    for (size_t i = 0; i < b.x.size(); ++i) b.x[i] = static_cast<int32_t>(rng.bits(i) % 256);
    b.y.assign(b.x.size(), -1);
    for (int r = 0; r < b.B; ++r)
        b.y[static_cast<size_t>(r) * b.T] = r == 3 ? -1 : static_cast<int32_t>(rng.bits(1000 + r) % c.classes);
    return b;
}

template <typename T>
void write_raw(const std::filesystem::path& p, const std::vector<T>& v) {
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

std::vector<float> all_grads(const Classifier& m) {
    std::vector<float> g;
    for (size_t i = 0; i < m.param_specs().size(); ++i) {
        const Tensor t = m.trained().grad(i);
        g.insert(g.end(), static_cast<const float*>(t.data), static_cast<const float*>(t.data) + t.numel());
    }
    return g;
}

void compare_with_pytorch(bool conv) {
    const ClassifierConfig cfg = tiny(conv);
    Classifier model(cfg, Device::kCpu, DType::kF32);
    model.init_random(42);
    // Biases start at 0; give them values so their paths are exercised.
    for (size_t i = 0; i < model.param_specs().size(); ++i)
        if (model.param_specs()[i].kind == ParamKind::kBias) {
            auto v = model.trained().read_f32(i);
            for (size_t k = 0; k < v.size(); ++k) v[k] = 0.05f * static_cast<float>(k % 3) - 0.04f;
            model.trained().write_f32(i, v.data());
        }
    const Batch b = make_batch(cfg);
    const auto dir = std::filesystem::temp_directory_path() / fmt::format("llmt_cls_ref_{}_{}", ::getpid(), conv);
    std::filesystem::create_directories(dir);
    nlohmann::json man = {{"conv", conv},
                          {"H", cfg.H},
                          {"W", cfg.W},
                          {"C", cfg.C},
                          {"classes", cfg.classes},
                          {"mean", cfg.pixel_mean},
                          {"std", cfg.pixel_std},
                          {"B", b.B},
                          {"params", nlohmann::json::array()}};
    std::vector<float> flat;
    for (size_t i = 0; i < model.param_specs().size(); ++i) {
        man["params"].push_back({model.param_specs()[i].name, model.param_specs()[i].shape});
        const auto v = model.trained().read_f32(i);
        flat.insert(flat.end(), v.begin(), v.end());
    }
    write_file_atomic(dir / "manifest.json", man.dump());
    write_raw(dir / "params.f32", flat);
    write_raw(dir / "pixels.i32", b.x);
    std::vector<int32_t> labels;
    for (int r = 0; r < b.B; ++r) labels.push_back(b.y[static_cast<size_t>(r) * b.T]);
    write_raw(dir / "labels.i32", labels);
    const auto r = testing::run_process(
        {"/usr/bin/python3", std::string(LLMT_SOURCE_DIR) + "/tools/ref/classifier_ref.py", dir.string()}, "", 300);
    ASSERT_EQ(r.exit_code, 0) << r.err;

    model.zero_grad();
    const float loss = model.forward(b.x.data(), b.y.data(), b.B, b.T, /*train=*/true);
    model.backward();
    const double ref_loss = std::stod(read_file(dir / "loss.txt"));
    // fp32 against float64 over sums of <= 9*C*W*H products: rounding stays near 1e-6 relative; 1e-5 leaves
    // room for rounding only (a wrong layout or a missing term is off by far more).
    EXPECT_NEAR(loss, ref_loss, 1e-5 * std::abs(ref_loss) + 1e-7);
    const std::string gs = read_file(dir / "grads.f64");
    std::vector<double> ref(gs.size() / sizeof(double));
    std::memcpy(ref.data(), gs.data(), gs.size());
    const std::vector<float> ours = all_grads(model);
    ASSERT_EQ(ours.size(), ref.size());
    double max_ref = 0;
    for (double v : ref) max_ref = std::max(max_ref, std::abs(v));
    ASSERT_GT(max_ref, 1e-4);  // the gradients are not all zero
    for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(ours[i], ref[i], 1e-5 * max_ref + 1e-4 * std::abs(ref[i])) << "gradient element " << i;
    std::filesystem::remove_all(dir);
}

TEST(ClassifierReference, CnnLossAndGradientsMatchPytorch) { compare_with_pytorch(true); }
TEST(ClassifierReference, MlpLossAndGradientsMatchPytorch) { compare_with_pytorch(false); }

// Central differences of our fp32 loss at coordinates of every tensor. eps 1e-2: truncation error
// O(eps^2 * third derivative) ~1e-5 and rounding ~1e-7 / eps = 1e-5, so 2e-3 absolute + 2% relative holds
// unless the step crosses a ReLU or max-pool kink; such coordinates are skipped when the one-sided
// differences disagree (the loss is not differentiable there). The CNN here has conv channels {3, 4}: with
// {8, 4} a step of fc0.bias[4] crosses a kink the one-sided test does not flag (on im2col and Winograd
// alike); the PyTorch comparison above checks the {8, 4} model's gradients exactly.
void finite_differences(bool conv) {
    const ClassifierConfig cfg = tiny(conv, {3, 4});
    Classifier model(cfg, Device::kCpu, DType::kF32);
    model.init_random(3);
    const Batch b = make_batch(cfg);
    model.zero_grad();
    (void)model.forward(b.x.data(), b.y.data(), b.B, b.T, true);
    model.backward();
    const std::vector<float> grads = all_grads(model);
    float* p = static_cast<float*>(model.params().data());
    const float eps = 1e-2f;
    int checked = 0;
    size_t offset = 0;
    for (size_t t = 0; t < model.param_specs().size(); ++t) {
        const Tensor w = model.trained().weight(t);
        const size_t base = static_cast<size_t>(static_cast<float*>(w.data) - p);
        for (int64_t k = 0; k < w.numel(); k += std::max<int64_t>(1, w.numel() / 4)) {
            float& v = p[base + static_cast<size_t>(k)];
            const float v0 = v;
            const double l0 = model.forward(b.x.data(), b.y.data(), b.B, b.T, false);
            v = v0 + eps;
            const double lp = model.forward(b.x.data(), b.y.data(), b.B, b.T, false);
            v = v0 - eps;
            const double lm = model.forward(b.x.data(), b.y.data(), b.B, b.T, false);
            v = v0;
            const double fwd = (lp - l0) / eps, bwd = (l0 - lm) / eps;
            if (std::abs(fwd - bwd) > 0.2 * std::max(std::abs(fwd), std::abs(bwd)) + 2e-3) continue;  // a kink
            const double fd = (lp - lm) / (2 * eps);
            const double g = grads[offset + static_cast<size_t>(k)];
            EXPECT_NEAR(g, fd, 2e-3 + 0.02 * std::abs(fd)) << model.param_specs()[t].name << "[" << k << "]";
            ++checked;
        }
        offset += static_cast<size_t>(w.numel());
    }
    EXPECT_GE(checked, static_cast<int>(model.param_specs().size()) * 2);  // most coordinates were smooth
}

TEST(Classifier, CnnGradientsMatchFiniteDifferences) { finite_differences(true); }
TEST(Classifier, MlpGradientsMatchFiniteDifferences) { finite_differences(false); }

// An eval forward leaves the class logits; the prediction of an unlabelled row does not change the loss.
TEST(Classifier, PaddingRowsWeighNothing) {
    const ClassifierConfig cfg = tiny(true);
    Classifier model(cfg, Device::kCpu, DType::kF32);
    model.init_random(5);
    Batch b = make_batch(cfg);
    const float l1 = model.forward(b.x.data(), b.y.data(), b.B, b.T, false);
    for (int i = 0; i < b.T; ++i) b.x[static_cast<size_t>(3 * b.T + i)] = 255 - b.x[static_cast<size_t>(3 * b.T + i)];
    const float l2 = model.forward(b.x.data(), b.y.data(), b.B, b.T, false);
    EXPECT_EQ(l1, l2);
    (void)model.forward(b.x.data(), nullptr, b.B, b.T, false);
    const float* logits = model.logits();
    EXPECT_TRUE(std::isfinite(logits[0]) && std::isfinite(logits[b.B * cfg.classes - 1]));
}


// classify() (the evaluation path: prediction and loss sum on the model's device) against the logits and
// loss of forward(): per row the argmax of the logits, the first on ties, and the summed loss of the
// labelled rows; with dropout configured, evaluation reads the hidden layers unmasked (no "dropped" copy),
// so the result is the same as forward()'s. The sums differ only in rounding (double vs float mean): 1e-6.
TEST(Classifier, ClassifyMatchesForwardLogitsAndLoss) {
    for (const bool conv : {true, false}) {
        ClassifierConfig cfg = tiny(conv);
        cfg.dropout = 0.5f;
        Classifier model(cfg, Device::kCpu, DType::kF32);
        model.init_random(11);
        Batch b = make_batch(cfg);
        std::vector<int32_t> labels(static_cast<size_t>(b.B));
        int counted = 0;
        for (int r = 0; r < b.B; ++r) {
            labels[static_cast<size_t>(r)] = b.y[static_cast<size_t>(r) * b.T];
            counted += labels[static_cast<size_t>(r)] >= 0;
        }
        const float mean = model.forward(b.x.data(), b.y.data(), b.B, b.T, false);
        (void)model.forward(b.x.data(), nullptr, b.B, b.T, false);
        const std::vector<float> logits(model.logits(), model.logits() + b.B * cfg.classes);
        std::vector<int32_t> preds(static_cast<size_t>(b.B), -5);
        const double sum = model.classify(b.x.data(), labels.data(), b.B, preds.data());
        for (int r = 0; r < b.B; ++r) {
            const float* l = logits.data() + static_cast<size_t>(r) * cfg.classes;
            EXPECT_EQ(preds[static_cast<size_t>(r)], std::max_element(l, l + cfg.classes) - l) << "row " << r;
        }
        EXPECT_NEAR(sum, static_cast<double>(mean) * counted, 1e-6 * std::fabs(sum)) << (conv ? "cnn" : "mlp");
        b.x[7] = 256;
        EXPECT_THROW(model.classify(b.x.data(), labels.data(), b.B, preds.data()), InputError);
        b.x[7] = 0;
        labels[1] = cfg.classes;
        EXPECT_THROW(model.classify(b.x.data(), labels.data(), b.B, preds.data()), InputError);
    }
}

// Reference rows (kernels/image_refs.h: a row naming an image of a set bound to the model, with its augmentation
// draw) give exactly what the same images' pixel rows give: the loss and every gradient bit for bit, since
// both read the same lookup table per byte. A blank reference row (index -1) is a row of 0 pixels.
TEST(Classifier, ReferenceRowsEqualPixelRows) {
    const ClassifierConfig cfg = tiny(true);
    const Batch b = make_batch(cfg);
    auto set = std::make_shared<data::ImageSet>();
    set->n = b.B;
    set->H = cfg.H, set->W = cfg.W, set->C = cfg.C;
    for (int32_t v : b.x) set->pixels.push_back(static_cast<uint8_t>(v));
    set->labels.assign(static_cast<size_t>(b.B), 0);
    const std::vector<data::AugmentDraw> draws = {
        {0, 0, false}, {1, -2, true}, {-1, 0, false}, {2, 2, true}, {0, 0, false}};
    Batch pix = b, ref = b;
    for (int r = 0; r < b.B; ++r) {
        int32_t* prow = pix.x.data() + static_cast<size_t>(r) * b.T;
        std::vector<uint8_t> aug(static_cast<size_t>(b.T));
        data::apply_augment(aug.data(), set->image(r), cfg.H, cfg.W, cfg.C, draws[static_cast<size_t>(r)]);
        for (int i = 0; i < b.T; ++i) prow[i] = r == 4 ? 0 : aug[static_cast<size_t>(i)];
        std::fill(ref.x.begin() + static_cast<int64_t>(r) * b.T, ref.x.begin() + static_cast<int64_t>(r + 1) * b.T, 0);
        const data::AugmentDraw& d = draws[static_cast<size_t>(r)];
        kernels::write_image_ref(ref.x.data() + static_cast<size_t>(r) * b.T, /*slot=*/1, r == 4 ? -1 : r, d.dy, d.dx,
                                 d.flip);
    }
    Classifier a(cfg, Device::kCpu, DType::kF32), c(cfg, Device::kCpu, DType::kF32);
    a.init_random(3);
    c.init_random(3);
    c.bind_images(1, ImageSource{set, set->pixels.data(), set->n, set->H, set->W, set->C});
    a.zero_grad();
    c.zero_grad();
    const float la = a.forward(pix.x.data(), pix.y.data(), b.B, b.T, /*train=*/true);
    const float lc = c.forward(ref.x.data(), ref.y.data(), b.B, b.T, /*train=*/true);
    a.backward();
    c.backward();
    EXPECT_EQ(la, lc);
    EXPECT_EQ(all_grads(a), all_grads(c));
    // A slot nothing is bound to is refused, not read.
    ref.x[1] = 0;
    for (int r = 0; r < b.B; ++r) ref.x[static_cast<size_t>(r) * b.T + 1] = 0;
    EXPECT_ANY_THROW(c.forward(ref.x.data(), ref.y.data(), b.B, b.T, /*train=*/false));
}

// classify_images (the whole evaluation as one loop on the model's device) against classify() on pixel
// rows: the same predictions, and the loss sum to rounding (per-batch double sums added in another grouping:
// 1e-6 relative); images in an arbitrary order, a short last batch, unlabelled images not counted.
TEST(Classifier, ClassifyImagesMatchesClassifyOnPixelRows) {
    const ClassifierConfig cfg = tiny(true);
    const int n = 11, B = 4, T = cfg.H * cfg.W * cfg.C;
    auto set = std::make_shared<data::ImageSet>();
    set->n = n;
    set->H = cfg.H, set->W = cfg.W, set->C = cfg.C;
    const CounterRng rng(9, 2);
    for (int i = 0; i < n * T; ++i)
        set->pixels.push_back(static_cast<uint8_t>(rng.bits(static_cast<uint64_t>(i)) % 256));
    Classifier model(cfg, Device::kCpu, DType::kF32);
    model.init_random(13);
    model.bind_images(0, ImageSource{set, set->pixels.data(), set->n, set->H, set->W, set->C});
    const std::vector<int64_t> idx = {3, 7, 0, 10, 5, 1, 9};
    std::vector<int32_t> labels;
    for (size_t i = 0; i < idx.size(); ++i)
        labels.push_back(i == 2 ? -1 : static_cast<int32_t>((idx[i] * 3) % cfg.classes));
    std::vector<int32_t> got(idx.size(), -5);
    const double sum =
        model.classify_images(0, idx.data(), labels.data(), static_cast<int64_t>(idx.size()), B, got.data());
    double want_sum = 0;
    for (size_t at = 0; at < idx.size(); at += B) {
        const int rows = static_cast<int>(std::min<size_t>(B, idx.size() - at));
        std::vector<int32_t> x(static_cast<size_t>(rows) * T), preds(static_cast<size_t>(rows));
        for (int r = 0; r < rows; ++r)
            for (int p = 0; p < T; ++p) x[static_cast<size_t>(r * T + p)] = set->image(idx[at + r])[p];
        want_sum += model.classify(x.data(), labels.data() + at, rows, preds.data());
        for (int r = 0; r < rows; ++r) EXPECT_EQ(got[at + r], preds[static_cast<size_t>(r)]) << "image " << at + r;
    }
    EXPECT_NEAR(sum, want_sum, 1e-6 * std::fabs(want_sum));
}

}  // namespace
}  // namespace llmt::models
