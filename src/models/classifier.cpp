#include "models/classifier.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/error.h"
#include "core/rng.h"
#include "kernels/conv_geom.h"
#include "kernels/ops.h"

namespace llmt::models {

namespace {

constexpr kernels::Conv2dGeom kConv3x3{3, 3, 1, 1};

Tensor reshaped(const Tensor& t, std::initializer_list<int64_t> dims) { return Tensor(t.data, dims, t.dtype, t.device); }

}  // namespace

ClassifierConfig ClassifierConfig::from(const config::Config& cfg) {
    const config::ModelConfig& m = cfg.model;
    LLMT_CHECK(m.is_classifier(), "model.arch: expected mlp or cnn, found {}", m.arch);
    ClassifierConfig c;
    c.conv = m.arch == "cnn";
    c.H = c.W = m.image_size;
    c.C = m.in_channels;
    c.classes = m.num_classes;
    if (c.conv) c.conv_channels = m.conv_channels;
    c.hidden = m.hidden_sizes;
    c.dropout = m.dropout;
    c.pixel_mean = static_cast<float>(cfg.data.pixel_mean);
    c.pixel_std = static_cast<float>(cfg.data.pixel_std);
    return c;
}

double ClassifierConfig::train_flops_per_image() const {
    double macs = 0;
    int h = H, w = W, ch = C;
    for (int oc : conv_channels) {
        macs += static_cast<double>(h) * w * oc * 9.0 * ch;
        h /= 2;
        w /= 2;
        ch = oc;
    }
    double in = static_cast<double>(h) * w * ch;
    for (int out : hidden) {
        macs += in * out;
        in = out;
    }
    macs += in * classes;
    return 6.0 * macs;  // forward 2 FLOPs per multiply-add, backward twice that
}

Classifier::Classifier(const ClassifierConfig& cfg, Device device, DType dtype, bool allocate) : cfg_(cfg) {
    LLMT_CHECK(dtype == DType::kF32, "model.arch {}: trainer.precision must be fp32 (the image kernels are fp32)",
               arch());
    LLMT_CHECK(cfg.H > 0 && cfg.W > 0 && cfg.C > 0 && cfg.classes > 1, "{}: invalid sizes", arch());
    auto add = [&](std::string name, std::vector<int64_t> shape, bool weight) {
        return store_.add(ParamSpec::make(std::move(name), std::move(shape),
                                          weight ? ParamInit::kKaimingUniform : ParamInit::kZeros,
                                          weight ? ParamKind::kWeight : ParamKind::kBias));
    };
    int h = cfg.H, w = cfg.W, ch = cfg.C;
    for (size_t i = 0; i < cfg.conv_channels.size(); ++i) {
        const int oc = cfg.conv_channels[i];
        LLMT_CHECK(h >= 2 && w >= 2, "model.conv_channels: convolution {} would pool a {}x{} image", i + 1, h, w);
        ConvLayer L{};
        L.w = add(fmt::format("conv{}.weight", i), {oc, 3, 3, ch}, true);
        L.b = add(fmt::format("conv{}.bias", i), {oc}, false);
        L.H = h;
        L.W = w;
        L.C = ch;
        L.OC = oc;
        convs_.push_back(L);
        h /= 2;
        w /= 2;
        ch = oc;
    }
    int in = h * w * ch;
    for (size_t i = 0; i <= cfg.hidden.size(); ++i) {
        const bool hidden = i < cfg.hidden.size();
        const int out = hidden ? cfg.hidden[i] : cfg.classes;
        const std::string name = hidden ? fmt::format("fc{}", i) : std::string("out");
        DenseLayer L{};
        L.w = add(name + ".weight", {out, in}, true);
        L.b = add(name + ".bias", {out}, false);
        L.in = in;
        L.out = out;
        L.relu = hidden;
        dense_.push_back(L);
        in = out;
    }
    dims_ = {static_cast<int>(convs_.size() + dense_.size()), cfg.hidden.empty() ? cfg.classes : cfg.hidden.front(),
             cfg.H * cfg.W * cfg.C, cfg.classes, cfg.classes};
    layout_params(LoraSpec{}, device, dtype);
    if (allocate) allocate_params();
    (void)layout_activations(1);  // the entry indices, the same for every B
}

std::string Classifier::summary() const {
    return fmt::format("{}, {}x{}x{} images, conv channels [{}], hidden [{}], {} classes, dropout {:g}, {:.3f}M parameters",
                       arch(), cfg_.H, cfg_.W, cfg_.C, fmt::join(cfg_.conv_channels, ", "), fmt::join(cfg_.hidden, ", "),
                       cfg_.classes, cfg_.dropout, static_cast<double>(num_parameters()) / 1e6);
}

void Classifier::init_base(uint64_t seed) { store_.init_random(seed, 0.02, 0.02); }

Arena Classifier::layout_activations(int B) const {
    auto* self = const_cast<Classifier*>(this);  // records the entry indices (identical for every B)
    Arena a;
    const int64_t b = B;
    int64_t widest = static_cast<int64_t>(cfg_.H) * cfg_.W * cfg_.C;
    self->x0_ = a.add("x0", {b, cfg_.H, cfg_.W, cfg_.C});
    for (size_t i = 0; i < self->convs_.size(); ++i) {
        auto& L = self->convs_[i];
        L.cols = a.add(fmt::format("conv{}.cols", i), {b * L.H * L.W, 9 * L.C});
        L.conv_out = a.add(fmt::format("conv{}.out", i), {b, L.H, L.W, L.OC});
        L.pooled = a.add(fmt::format("conv{}.pooled", i), {b, L.H / 2, L.W / 2, L.OC});
        L.argmax = a.add(fmt::format("conv{}.argmax", i), {b, L.H / 2, L.W / 2, L.OC}, DType::kI32);
        widest = std::max<int64_t>(widest, static_cast<int64_t>(L.H) * L.W * L.OC);
    }
    for (size_t i = 0; i < self->dense_.size(); ++i) {
        auto& L = self->dense_[i];
        L.out_act = a.add(fmt::format("dense{}.out", i), {b, L.out});
        L.dropped = L.relu && cfg_.dropout > 0.f ? a.add(fmt::format("dense{}.dropped", i), {b, L.out}) : L.out_act;
        widest = std::max<int64_t>(widest, std::max(L.in, L.out));
    }
    self->labels_ = a.add("labels", {b}, DType::kI32);
    self->losses_ = a.add("losses", {b});
    self->dx_a_ = a.add("grad_a", {b * widest});
    self->dx_b_ = a.add("grad_b", {b * widest});
    self->max_width_ = widest;
    return a;
}

void Classifier::ensure_activations(int B) {
    if (acts_.allocated() && acts_B_ >= B) return;
    acts_ = layout_activations(B);
    acts_.allocate(/*zero=*/false, device());
    acts_B_ = B;
}

Tensor Classifier::act(size_t id, std::initializer_list<int64_t> dims) const { return reshaped(acts_.view(id), dims); }

uint64_t Classifier::layer_seed(size_t layer) const { return splitmix64(dropout_seed_ + 0x636c73ull * (layer + 1)); }

void Classifier::dense_activation_forward(const DenseLayer& l, int B, bool train, size_t index) {
    const Tensor out = act(l.out_act, {B, l.out});
    kernels::relu_forward(out, out);
    if (l.dropped != l.out_act) {
        const Tensor dropped = act(l.dropped, {B, l.out});
        if (train) kernels::dropout_forward(dropped, out, cfg_.dropout, layer_seed(index));
        else kernels::copy(dropped, out);
    }
}

float Classifier::forward(const int32_t* inputs, const int32_t* targets, int B, int T, bool train, float loss_scale,
                          const int32_t* positions) {
    const int64_t pixels = static_cast<int64_t>(cfg_.H) * cfg_.W * cfg_.C;
    LLMT_INTERNAL_CHECK(B > 0 && T == pixels, "{} forward: rows of {} pixels expected, got B {} T {}", arch(), pixels,
                        B, T);
    LLMT_INTERNAL_CHECK(!positions, "{} forward: position ids are for packed token rows", arch());
    LLMT_INTERNAL_CHECK(!train || targets, "{} forward: training needs targets", arch());
    ensure_activations(B);
    // Bytes -> (p/255 - mean) / std on the host, then to the device.
    std::vector<float> x(static_cast<size_t>(B * pixels));
    const float scale = 1.f / (255.f * cfg_.pixel_std), shift = cfg_.pixel_mean / cfg_.pixel_std;
    for (size_t i = 0; i < x.size(); ++i) {
        LLMT_CHECK(inputs[i] >= 0 && inputs[i] < 256, "{} forward: pixel {} at index {} is outside 0..255", arch(),
                   inputs[i], i);
        x[i] = static_cast<float>(inputs[i]) * scale - shift;
    }
    kernels::copy(act(x0_, {B, cfg_.H, cfg_.W, cfg_.C}), Tensor(x.data(), {B, cfg_.H, cfg_.W, cfg_.C}));

    Tensor inp = act(x0_, {B, cfg_.H, cfg_.W, cfg_.C});
    for (const auto& L : convs_) {
        const Tensor out = act(L.conv_out, {B, L.H, L.W, L.OC});
        kernels::conv2d_forward(out, act(L.cols, {static_cast<int64_t>(B) * L.H * L.W, 9 * L.C}), inp,
                                store_.weight(L.w), store_.weight(L.b), kConv3x3);
        kernels::relu_forward(out, out);
        const Tensor pooled = act(L.pooled, {B, L.H / 2, L.W / 2, L.OC});
        kernels::maxpool2d_forward(pooled, act(L.argmax, {B, L.H / 2, L.W / 2, L.OC}), out);
        inp = pooled;
    }
    for (size_t i = 0; i < dense_.size(); ++i) {
        const auto& L = dense_[i];
        kernels::matmul_forward(act(L.out_act, {B, L.out}), reshaped(inp, {B, L.in}), store_.weight(L.w),
                                store_.weight(L.b));
        if (L.relu) dense_activation_forward(L, B, train, i);
        inp = act(L.dropped, {B, L.out});
    }
    B_last_ = B;
    train_last_ = train;
    const Tensor logits = act(dense_.back().out_act, {B, 1, cfg_.classes});
    auto keep_logits = [&] {
        all_logits_.resize(static_cast<size_t>(B) * cfg_.classes);
        kernels::copy(Tensor(all_logits_.data(), {B, 1, cfg_.classes}), logits);
    };
    if (!targets) {
        keep_logits();
        return 0.f;
    }
    std::vector<int32_t> labels(static_cast<size_t>(B));
    counted_ = 0;
    for (int b = 0; b < B; ++b) {
        const int32_t y = targets[static_cast<int64_t>(b) * T];
        LLMT_CHECK(y < cfg_.classes, "{} forward: label {} of row {} is not below model.num_classes ({})", arch(), y, b,
                   cfg_.classes);
        labels[static_cast<size_t>(b)] = y < 0 ? -1 : y;
        counted_ += y >= 0;
    }
    LLMT_CHECK(counted_ > 0, "{} forward: no row has a label", arch());
    const Tensor lab = act(labels_, {B, 1});
    kernels::copy(lab, Tensor(labels.data(), {B, 1}, DType::kI32));
    const Tensor losses = act(losses_, {B, 1});
    if (train) {
        dloss_ = loss_scale / static_cast<float>(counted_);
        kernels::classifier_forward_backward(losses, logits, lab, dloss_, cfg_.classes);
    } else {
        kernels::classifier_forward(losses, logits, lab, cfg_.classes);
        keep_logits();
    }
    std::vector<float> host(static_cast<size_t>(B));
    kernels::copy(Tensor(host.data(), {B, 1}), losses);
    double sum = 0;
    for (int b = 0; b < B; ++b)
        if (labels[static_cast<size_t>(b)] >= 0) sum += host[static_cast<size_t>(b)];
    return static_cast<float>(sum / static_cast<double>(counted_));
}

void Classifier::backward() {
    LLMT_INTERNAL_CHECK(train_last_ && B_last_ > 0, "{} backward: needs a training forward first", arch());
    const int B = B_last_;
    const Tensor bufs[2] = {acts_.view(dx_a_), acts_.view(dx_b_)};
    int next = 0;  // the ping-pong buffer the next gradient goes to
    auto take = [&](std::initializer_list<int64_t> dims) {
        const Tensor t = reshaped(bufs[next], dims);
        next ^= 1;
        return t;
    };
    // The loss's gradient is in the class layer's output (classifier_forward_backward wrote it there).
    Tensor dout = act(dense_.back().out_act, {B, dense_.back().out});
    for (size_t k = dense_.size(); k-- > 0;) {
        const auto& L = dense_[k];
        if (L.relu) {
            if (L.dropped != L.out_act) {
                const Tensor d = take({B, L.out});
                kernels::dropout_backward(d, dout, cfg_.dropout, layer_seed(k));
                dout = d;
            }
            kernels::relu_backward(dout, dout, act(L.out_act, {B, L.out}));
        }
        const bool first_layer = k == 0 && convs_.empty();
        const Tensor inp = k > 0 ? act(dense_[k - 1].dropped, {B, L.in})
                                 : (convs_.empty() ? act(x0_, {B, L.in}) : act(convs_.back().pooled, {B, L.in}));
        const Tensor dinp = first_layer ? Tensor() : take({B, L.in});
        kernels::matmul_backward(dinp, store_.grad(L.w), store_.grad(L.b), dout, inp, store_.weight(L.w));
        grads_ready_from(L.w);
        dout = dinp;
    }
    for (size_t k = convs_.size(); k-- > 0;) {
        const auto& L = convs_[k];
        const Tensor dconv = take({B, L.H, L.W, L.OC});
        kernels::maxpool2d_backward(dconv, reshaped(dout, {B, L.H / 2, L.W / 2, L.OC}),
                                    act(L.argmax, {B, L.H / 2, L.W / 2, L.OC}));
        kernels::relu_backward(dconv, dconv, act(L.conv_out, {B, L.H, L.W, L.OC}));
        const Tensor inp = k > 0 ? act(convs_[k - 1].pooled, {B, L.H, L.W, L.C}) : act(x0_, {B, L.H, L.W, L.C});
        const Tensor dinp = k > 0 ? take({B, L.H, L.W, L.C}) : Tensor();
        kernels::conv2d_backward(dinp, store_.grad(L.w), store_.grad(L.b), dconv,
                                 act(L.cols, {static_cast<int64_t>(B) * L.H * L.W, 9 * L.C}), inp,
                                 store_.weight(L.w), kConv3x3);
        grads_ready_from(L.w);
        dout = dinp;
    }
    grads_ready_all();
}

MemoryPlan Classifier::memory_plan(int B, int T) const {
    MemoryPlan m = params_memory_plan(B, T);
    m.activations += layout_activations(B).nbytes();
    return m;
}

double Classifier::flops_per_token(int /*T*/) const {
    return cfg_.train_flops_per_image() / static_cast<double>(cfg_.H * cfg_.W * cfg_.C);
}

std::unique_ptr<Decoder> Classifier::decoder(int /*max_T*/) const {
    throw InputError(fmt::format("model.arch {} classifies images and has no text decoder (use llmtrain predict)", arch()));
}

}  // namespace llmt::models
