#include "models/classifier.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "config/arch_table.h"
#include "core/check.h"
#include "core/error.h"
#include "core/rng.h"
#include "kernels/conv_geom.h"
#include "kernels/ops.h"
#include "models/arch.h"

namespace llmt::models {

namespace {

constexpr kernels::Conv2dGeom kConv3x3{3, 3, 1, 1};

Tensor reshaped(const Tensor& t, std::initializer_list<int64_t> dims) {
    return Tensor(t.data, dims, t.dtype, t.device);
}

}  // namespace

ClassifierConfig ClassifierConfig::from(const config::Config& cfg) {
    const config::ModelConfig& m = cfg.model;
    LLMT_CHECK(m.is_classifier(), "model.arch: expected an image classifier, found {}", m.arch);
    ClassifierConfig c;
    c.conv = config::find_arch(m.arch)->reads("model.conv_channels");
    c.H = c.W = m.classifier.image_size;
    c.C = m.classifier.in_channels;
    c.classes = m.classifier.num_classes;
    if (c.conv) c.conv_channels = m.classifier.conv_channels;
    c.hidden = m.classifier.hidden_sizes;
    c.dropout = m.dropout;
    c.pixel_mean = static_cast<float>(cfg.data.pixel_mean);
    c.pixel_std = static_cast<float>(cfg.data.pixel_std);
    c.conv_tf32 = cfg.trainer.conv_tf32;
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
    const float scale = 1.f / (255.f * cfg.pixel_std), shift = cfg.pixel_mean / cfg.pixel_std;
    for (int p = 0; p < 256; ++p) pixel_table_[static_cast<size_t>(p)] = static_cast<float>(p) * scale - shift;
    layout_params(LoraSpec{}, device, dtype);
    if (allocate) allocate_params();
    (void)layout_activations(1);  // the entry indices, the same for every B
}

std::string Classifier::summary() const {
    return fmt::format(
        "{}, {}x{}x{} images, conv channels [{}], hidden [{}], {} classes, dropout {:g}, {:.3f}M parameters", arch(),
        cfg_.H, cfg_.W, cfg_.C, fmt::join(cfg_.conv_channels, ", "), fmt::join(cfg_.hidden, ", "), cfg_.classes,
        cfg_.dropout, static_cast<double>(num_parameters()) / 1e6);
}

void Classifier::init_base(uint64_t seed) { store_.init_random(seed, 0.02, 0.02); }

Arena Classifier::layout_activations(int B) const {
    auto* self = const_cast<Classifier*>(this);  // records the entry indices (identical for every B)
    Arena a;
    const int64_t b = B;
    int64_t widest = static_cast<int64_t>(cfg_.H) * cfg_.W * cfg_.C;
    self->x0_ = a.add("x0", {b, cfg_.H, cfg_.W, cfg_.C});
    self->pixels_ = a.add("pixels", {device() == Device::kCuda ? b * cfg_.H * cfg_.W * cfg_.C : 0}, DType::kI32);
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
    self->preds_ = a.add("preds", {b}, DType::kI32);
    self->refs_ = a.add("refs", {b, 4}, DType::kI32);
    self->loss_sum_ = a.add("loss_sum", {2});
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
    if (train && l.dropped != l.out_act)  // evaluation reads out_act itself (run_layers)
        kernels::dropout_forward(act(l.dropped, {B, l.out}), out, cfg_.dropout, layer_seed(index));
}

namespace {

// Throws InputError naming the first pixel outside 0..255. The scan is branch-free (vectorised), so
// valid batches pay one pass over the bytes.
void check_pixels(std::string_view arch, const int32_t* px, size_t n) {
    uint32_t bad = 0;
#pragma omp simd reduction(| : bad)
    for (size_t i = 0; i < n; ++i) bad |= static_cast<uint32_t>(px[i]) >> 8;  // nonzero outside 0..255
    if (!bad) return;
    const size_t i = static_cast<size_t>(std::find_if(px, px + n, [](int32_t p) { return p < 0 || p > 255; }) - px);
    throw InputError(fmt::format("{} forward: pixel {} at index {} is outside 0..255", arch, px[i], i));
}

}  // namespace

void Classifier::bind_images(int slot, const ImageSource& images) {
    LLMT_INTERNAL_CHECK(slot >= 0 && images.pixels && images.n > 0, "{}: bind_images needs a slot >= 0 and images",
                        arch());
    LLMT_CHECK(images.H == cfg_.H && images.W == cfg_.W && images.C == cfg_.C,
               "{}: images of {}x{}x{} bound to a model of {}x{}x{} inputs", arch(), images.H, images.W, images.C,
               cfg_.H, cfg_.W, cfg_.C);
    if (static_cast<size_t>(slot) >= bound_.size()) bound_.resize(static_cast<size_t>(slot) + 1);
    BoundImages b;
    b.source = images;
    if (device() == Device::kCuda) {
        const size_t bytes = static_cast<size_t>(images.n) * images.H * images.W * images.C;
        b.device_pixels.add("pixels", {static_cast<int64_t>((bytes + 3) / 4)}, DType::kI32);
        b.device_pixels.allocate(/*zero=*/false, device());
        kernels::upload_bytes(device(), b.device_pixels.view(0).data, images.pixels, bytes);
    }
    bound_[static_cast<size_t>(slot)] = std::move(b);
}

void Classifier::load_image_refs(const int32_t* inputs, int B) {
    const int64_t T = static_cast<int64_t>(cfg_.H) * cfg_.W * cfg_.C;
    LLMT_INTERNAL_CHECK(T >= kernels::kImageRefInts, "{}: rows of {} values cannot hold image references", arch(), T);
    const int slot = inputs[1];
    LLMT_INTERNAL_CHECK(
        slot >= 0 && static_cast<size_t>(slot) < bound_.size() && bound_[static_cast<size_t>(slot)].source.pixels,
        "{}: reference rows name image slot {}, which has no bound set", arch(), slot);
    const BoundImages& bound = bound_[static_cast<size_t>(slot)];
    std::vector<kernels::ImageRef> refs(static_cast<size_t>(B));
    for (int b = 0; b < B; ++b) {
        const int32_t* row = inputs + b * T;
        LLMT_INTERNAL_CHECK(row[0] == kernels::kImageRefTag && row[1] == slot,
                            "{}: row {} of a batch of reference rows (slot {}) is not one", arch(), b, slot);
        LLMT_INTERNAL_CHECK(row[2] >= -1 && row[2] < bound.source.n && std::abs(row[3]) <= cfg_.H &&
                                std::abs(row[4]) <= cfg_.W && (row[5] == 0 || row[5] == 1),
                            "{}: row {} names image {} (dy {}, dx {}, flip {}) of a set of {}", arch(), b, row[2],
                            row[3], row[4], row[5], bound.source.n);
        refs[static_cast<size_t>(b)] = {row[2], row[3], row[4], row[5]};
    }
    Tensor r(refs.data(), {B, 4}, DType::kI32);
    const void* pixels = bound.source.pixels;
    if (device() == Device::kCuda) {
        const Tensor dev = act(refs_, {B, 4});
        kernels::copy(dev, r);
        r = dev;
        pixels = bound.device_pixels.view(0).data;
    }
    kernels::gather_images(
        act(x0_, {B, cfg_.H, cfg_.W, cfg_.C}),
        kernels::ImageTable{static_cast<const uint8_t*>(pixels), bound.source.n, cfg_.H, cfg_.W, cfg_.C}, r,
        pixel_table_.data());
}

void Classifier::load_inputs(const int32_t* inputs, int B) {
    if (inputs[0] == kernels::kImageRefTag) return load_image_refs(inputs, B);
    const int64_t n = static_cast<int64_t>(B) * cfg_.H * cfg_.W * cfg_.C;
    check_pixels(arch(), inputs, static_cast<size_t>(n));
    Tensor pixels(const_cast<int32_t*>(inputs), {n}, DType::kI32);
    if (device() == Device::kCuda) {
        const Tensor dev = reshaped(acts_.view(pixels_), {n});
        kernels::copy(dev, pixels);
        pixels = dev;
    }
    kernels::normalize_pixels(act(x0_, {n}), pixels, pixel_table_.data());
}

void Classifier::run_layers(int B, bool train) {
    Tensor inp = act(x0_, {B, cfg_.H, cfg_.W, cfg_.C});
    for (auto& L : convs_) {
        // conv + bias, 2x2 max-pool, then ReLU on the pooled quarter of the values: relu(max(x)) = max(relu(x))
        // (ReLU is monotonic), and a window whose max is positive has the same first argmax either way
        // (backward()). One fused kernel on CUDA (fp32), the three ops in turn elsewhere.
        const Tensor pooled = act(L.pooled, {B, L.H / 2, L.W / 2, L.OC});
        L.cols_ready = kernels::conv_pool_relu_forward(
            pooled, act(L.argmax, {B, L.H / 2, L.W / 2, L.OC}), act(L.conv_out, {B, L.H, L.W, L.OC}),
            act(L.cols, {static_cast<int64_t>(B) * L.H * L.W, 9 * L.C}), inp, store_.weight(L.w), store_.weight(L.b),
            kConv3x3, /*keep_argmax=*/train, cfg_.conv_tf32);
        inp = pooled;
    }
    for (size_t i = 0; i < dense_.size(); ++i) {
        const auto& L = dense_[i];
        kernels::matmul_forward(act(L.out_act, {B, L.out}), reshaped(inp, {B, L.in}), store_.weight(L.w),
                                store_.weight(L.b));
        if (L.relu) dense_activation_forward(L, B, train, i);
        inp = act(train ? L.dropped : L.out_act, {B, L.out});
    }
}

int64_t Classifier::load_labels(const int32_t* labels, int B) {
    int64_t counted = 0;
    for (int b = 0; b < B; ++b) {
        LLMT_CHECK(labels[b] < cfg_.classes, "{} forward: label {} of row {} is not below model.num_classes ({})",
                   arch(), labels[b], b, cfg_.classes);
        counted += labels[b] >= 0;
    }
    kernels::copy(act(labels_, {B}), Tensor(const_cast<int32_t*>(labels), {B}, DType::kI32));
    return counted;
}

float Classifier::forward(const int32_t* inputs, const int32_t* targets, int B, int T, bool train, float loss_scale,
                          const int32_t* positions) {
    const int64_t pixels = static_cast<int64_t>(cfg_.H) * cfg_.W * cfg_.C;
    LLMT_INTERNAL_CHECK(B > 0 && T == pixels, "{} forward: rows of {} pixels expected, got B {} T {}", arch(), pixels,
                        B, T);
    LLMT_INTERNAL_CHECK(!positions, "{} forward: position ids are for packed token rows", arch());
    LLMT_INTERNAL_CHECK(!train || targets, "{} forward: training needs targets", arch());
    ensure_activations(B);
    load_inputs(inputs, B);
    run_layers(B, train);
    B_last_ = B;
    train_last_ = train;
    const Tensor logits = act(dense_.back().out_act, {B, 1, cfg_.classes});
    if (!targets) {
        all_logits_.resize(static_cast<size_t>(B) * cfg_.classes);
        kernels::copy(Tensor(all_logits_.data(), {B, 1, cfg_.classes}), logits);
        return 0.f;
    }
    std::vector<int32_t> labels(static_cast<size_t>(B));
    for (int b = 0; b < B; ++b) labels[static_cast<size_t>(b)] = std::max(targets[static_cast<int64_t>(b) * T], -1);
    counted_ = load_labels(labels.data(), B);
    LLMT_CHECK(counted_ > 0, "{} forward: no row has a label", arch());
    const Tensor lab = act(labels_, {B, 1});
    const Tensor losses = act(losses_, {B, 1});
    if (train) {
        dloss_ = loss_scale / static_cast<float>(counted_);
        kernels::classifier_forward_backward(losses, logits, lab, dloss_, cfg_.classes);
    } else {
        kernels::classifier_forward(losses, logits, lab, cfg_.classes);
    }
    std::vector<float> host(static_cast<size_t>(B));
    kernels::copy(Tensor(host.data(), {B, 1}), losses);
    double sum = 0;
    for (int b = 0; b < B; ++b)
        if (labels[static_cast<size_t>(b)] >= 0) sum += host[static_cast<size_t>(b)];
    return static_cast<float>(sum / static_cast<double>(counted_));
}

double Classifier::classify(const int32_t* inputs, const int32_t* labels, int B, int32_t* preds) {
    LLMT_INTERNAL_CHECK(B > 0, "{} classify: B must be positive, got {}", arch(), B);
    ensure_activations(B);
    load_inputs(inputs, B);
    run_layers(B, /*train=*/false);
    train_last_ = false;
    load_labels(labels, B);
    const Tensor logits = act(dense_.back().out_act, {B, cfg_.classes});
    const Tensor lab = act(labels_, {B}), losses = act(losses_, {B});
    kernels::classifier_forward(reshaped(losses, {B, 1}), reshaped(logits, {B, 1, cfg_.classes}),
                                reshaped(lab, {B, 1}), cfg_.classes);
    const Tensor pred = act(preds_, {B}), sum = act(loss_sum_, {2});
    kernels::classifier_predict(pred, sum, logits, losses, lab, cfg_.classes);
    kernels::copy(Tensor(preds, {B}, DType::kI32), pred);
    float host_sum[2];
    kernels::copy(Tensor(host_sum, {2}), sum);
    return static_cast<double>(host_sum[0]) + static_cast<double>(host_sum[1]);
}

double Classifier::classify_images(int slot, const int64_t* indices, const int32_t* labels, int64_t n, int B,
                                   int32_t* preds) {
    LLMT_INTERNAL_CHECK(B > 0 && n >= 0, "{} classify_images: B {} and n {}", arch(), B, n);
    LLMT_INTERNAL_CHECK(
        slot >= 0 && static_cast<size_t>(slot) < bound_.size() && bound_[static_cast<size_t>(slot)].source.pixels,
        "{}: classify_images names image slot {}, which has no bound set", arch(), slot);
    if (n == 0) return 0.0;
    const BoundImages& bound = bound_[static_cast<size_t>(slot)];
    const bool cuda = device() == Device::kCuda;
    const int64_t batches = (n + B - 1) / B, padded = batches * B;
    // Host side: the references and labels of every image (blank, unlabelled rows after n), checked once.
    std::vector<kernels::ImageRef> refs(static_cast<size_t>(padded), kernels::ImageRef{-1, 0, 0, 0});
    std::vector<int32_t> lab(static_cast<size_t>(padded), -1);
    for (int64_t i = 0; i < n; ++i) {
        LLMT_INTERNAL_CHECK(indices[i] >= 0 && indices[i] < bound.source.n, "{}: image {} of a set of {}", arch(),
                            indices[i], bound.source.n);
        LLMT_CHECK(labels[i] < cfg_.classes, "{}: label {} of image {} is not below model.num_classes ({})", arch(),
                   labels[i], indices[i], cfg_.classes);
        refs[static_cast<size_t>(i)] = {static_cast<int32_t>(indices[i]), 0, 0, 0};
        lab[static_cast<size_t>(i)] = labels[i] < 0 ? -1 : labels[i];
    }
    // Device side (the CPU uses the host vectors): references, labels, predictions, per-batch loss sums.
    Arena eval;
    const size_t e_refs = eval.add("refs", {padded, 4}, DType::kI32),
                 e_lab = eval.add("labels", {padded}, DType::kI32), e_pred = eval.add("preds", {padded}, DType::kI32),
                 e_sum = eval.add("sums", {batches, 2});
    std::vector<int32_t> host_preds(static_cast<size_t>(padded));
    std::vector<float> host_sums(static_cast<size_t>(batches) * 2);
    auto at = [&](size_t entry, void* host, DType dt, int64_t offset, std::initializer_list<int64_t> dims,
                  int64_t width) {
        if (!cuda) return Tensor(static_cast<char*>(host) + offset * width * dtype_size(dt), dims, dt);
        const Tensor whole = eval.view(entry);
        return Tensor(static_cast<char*>(whole.data) + offset * width * dtype_size(dt), dims, dt, device());
    };
    const void* pixels = bound.source.pixels;
    if (cuda) {
        eval.allocate(/*zero=*/false, device());
        kernels::copy(eval.view(e_refs), Tensor(refs.data(), {padded, 4}, DType::kI32));
        kernels::copy(eval.view(e_lab), Tensor(lab.data(), {padded}, DType::kI32));
        pixels = bound.device_pixels.view(0).data;
    }
    ensure_activations(B);
    const kernels::ImageTable table{static_cast<const uint8_t*>(pixels), bound.source.n, cfg_.H, cfg_.W, cfg_.C};
    for (int64_t k = 0; k < batches; ++k) {
        const int b = cuda ? B : static_cast<int>(std::min<int64_t>(B, n - k * B));
        const int64_t first = k * B;
        kernels::gather_images(act(x0_, {b, cfg_.H, cfg_.W, cfg_.C}), table,
                               at(e_refs, refs.data(), DType::kI32, first, {b, 4}, 4), pixel_table_.data());
        run_layers(b, /*train=*/false);
        const Tensor logits = act(dense_.back().out_act, {b, cfg_.classes}), losses = act(losses_, {b});
        const Tensor labs = at(e_lab, lab.data(), DType::kI32, first, {b}, 1);
        kernels::classifier_forward(reshaped(losses, {b, 1}), reshaped(logits, {b, 1, cfg_.classes}),
                                    reshaped(labs, {b, 1}), cfg_.classes);
        kernels::classifier_predict(at(e_pred, host_preds.data(), DType::kI32, first, {b}, 1),
                                    at(e_sum, host_sums.data(), DType::kF32, k, {2}, 2), logits, losses, labs,
                                    cfg_.classes);
    }
    train_last_ = false;
    if (cuda) {
        kernels::copy(Tensor(host_preds.data(), {padded}, DType::kI32), eval.view(e_pred));
        kernels::copy(Tensor(host_sums.data(), {batches, 2}), eval.view(e_sum));
    }
    std::copy(host_preds.begin(), host_preds.begin() + n, preds);
    double sum = 0.0;
    for (int64_t k = 0; k < batches; ++k)
        sum += static_cast<double>(host_sums[static_cast<size_t>(2 * k)]) + host_sums[static_cast<size_t>(2 * k + 1)];
    return sum;
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
        // The pooled ReLU's gradient first (0 where the pooled value is <= 0, whichever argmax the window
        // has), then the scatter to the argmax positions: the same dconv as ReLU before the pool.
        const Tensor dpooled = reshaped(dout, {B, L.H / 2, L.W / 2, L.OC});
        kernels::relu_backward(dpooled, dpooled, act(L.pooled, {B, L.H / 2, L.W / 2, L.OC}));
        const Tensor dconv = take({B, L.H, L.W, L.OC});
        kernels::maxpool2d_backward(dconv, dpooled, act(L.argmax, {B, L.H / 2, L.W / 2, L.OC}));
        const Tensor inp = k > 0 ? act(convs_[k - 1].pooled, {B, L.H, L.W, L.C}) : act(x0_, {B, L.H, L.W, L.C});
        const Tensor dinp = k > 0 ? take({B, L.H, L.W, L.C}) : Tensor();
        const Tensor cols = act(L.cols, {static_cast<int64_t>(B) * L.H * L.W, 9 * L.C});
        if (!L.cols_ready) kernels::conv2d_im2col(cols, inp, kConv3x3);  // the fused forward wrote none
        kernels::conv2d_backward(dinp, store_.grad(L.w), store_.grad(L.b), dconv, cols, inp, store_.weight(L.w),
                                 kConv3x3, cfg_.conv_tf32);
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

// ---- The families (models/arch.h): mlp and cnn, image classifiers without a config.json. ----

namespace {

ArchSpec classifier_spec(const char* name) {
    ArchSpec s;
    s.entry = config::find_arch(name);
    LLMT_ASSERT(s.entry != nullptr);
    s.make = [](const config::Config& cfg, Device device, DType dtype, ParamShard shard) -> std::unique_ptr<Model> {
        LLMT_INTERNAL_CHECK(!shard.on(), "{}: image classifiers do not shard their parameters per unit",
                            cfg.model.arch);
        return std::make_unique<Classifier>(ClassifierConfig::from(cfg), device, dtype);
    };
    s.plan_memory = [](const config::Config& cfg, Device device, DType dtype, int B, int T) {
        return Classifier(ClassifierConfig::from(cfg), device, dtype, /*allocate=*/false).memory_plan(B, T);
    };
    // Per pixel ("token") of an image, as Classifier::flops_per_token.
    s.flops_per_token = [](const config::ModelConfig& m, int) {
        config::Config c;
        c.model = m;
        const ClassifierConfig cc = ClassifierConfig::from(c);
        return cc.train_flops_per_image() / static_cast<double>(cc.H * cc.W * cc.C);
    };
    return s;
}

}  // namespace

const ArchSpec& mlp_arch() {
    static const ArchSpec spec = classifier_spec("mlp");
    return spec;
}

const ArchSpec& cnn_arch() {
    static const ArchSpec spec = classifier_spec("cnn");
    return spec;
}

}  // namespace llmt::models
