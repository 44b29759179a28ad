// Image classifiers (model.arch mlp | cnn) on the model interface the language models use. A row of the
// int32 (B, T) batch is one image: T = H*W*C pixel bytes (0..255, channels last), and the row's first
// target is its label (the other targets are -1, ignored), so the Trainer, the Reducer, checkpoints and
// resume drive a classifier unchanged (docs/architecture.md "Classifiers"). The model normalises the
// bytes itself ((p/255 - mean) / std), so train, eval and predict read the same input.
//
//   cnn: per model.conv_channels entry a 3x3 convolution (padding 1) + ReLU + 2x2 max-pool, then the
//        hidden layers, then the class logits; mlp: the hidden layers on the flattened image.
//   hidden layer: linear + ReLU + dropout (model.dropout, training only).
//   Loss: softmax cross-entropy averaged over the labelled rows.
//
// Tensors (our names; torch layouts noted): conv{i}.weight (OC,3,3,C) = torch's (OC,C,3,3) permuted by
// (0,2,3,1); conv{i}.bias (OC); fc{i}.weight (out,in), fc{i}.bias (out); out.weight (classes,in),
// out.bias (classes). Activations are NHWC, so the first linear layer after the convolutions reads the
// features flattened in (h, w, c) order, where torch's nn.Flatten reads (c, h, w).
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "config/config.h"
#include "core/arena.h"
#include "models/model.h"

namespace llmt::models {

struct ClassifierConfig {
    bool conv = false;               // cnn
    int H = 28, W = 28, C = 1;       // input image
    int classes = 10;
    std::vector<int> conv_channels;  // cnn only
    std::vector<int> hidden;
    float dropout = 0.f;
    float pixel_mean = 0.f, pixel_std = 1.f;
    bool conv_tf32 = true;  // CUDA fp32: TF32 convolutions (kernels::conv_pool_relu_forward, conv2d_backward)
    static ClassifierConfig from(const config::Config& cfg);
    // Forward + backward FLOPs of one image (2 per multiply-add, backward twice the forward).
    double train_flops_per_image() const;
};

// The bytes of an image set (n x H x W x C, channels last) and the object that keeps them alive.
struct ImageSource {
    std::shared_ptr<const void> owner;
    const uint8_t* pixels = nullptr;
    int64_t n = 0;
    int H = 0, W = 0, C = 0;
};

class Classifier final : public Model {
public:
    // allocate false: the layout only (memory plans), no parameter memory.
    Classifier(const ClassifierConfig& cfg, Device device, DType dtype, bool allocate = true);

    std::string_view arch() const override { return cfg_.conv ? "cnn" : "mlp"; }
    std::string summary() const override;
    Classifier* image_classifier() override { return this; }
    const ClassifierConfig& config() const { return cfg_; }
    int num_classes() const { return cfg_.classes; }

    // Binds an image set to `slot` for reference rows (kernels/image_refs.h: a row naming an image of a bound set
    // and its augmentation draw instead of holding its pixels): the pixels stay in host memory for the CPU
    // backend and are uploaded to the device once for CUDA, so a step moves a few integers per image. The
    // set's image size must be the model's. Rebinding a slot replaces it.
    void bind_images(int slot, const ImageSource& images);

    // inputs: (B, T = H*W*C) pixel bytes, or reference rows (every row; blank rows name index -1); targets: (B, T)
    // with each row's label at its first slot (< 0: an unlabelled padding row). Without targets the class logits (B,
    // classes) are left for logits().
    float forward(const int32_t* inputs, const int32_t* targets, int B, int T, bool train, float loss_scale = 1.f,
                  const int32_t* positions = nullptr) override;
    void backward() override;
    // Evaluation of B images without training (train/classifier_eval.h): per row the predicted class (the
    // argmax of its logits) into preds (host, B ints); returns the summed loss of the rows whose label
    // (labels (B), host, < classes; < 0: not counted) is >= 0. inputs as forward's. Prediction and the
    // loss sum run on the model's device; two small copies (preds, the sum) come back per batch.
    double classify(const int32_t* inputs, const int32_t* labels, int B, int32_t* preds);
    // The same over n images of the set bound at `slot` (indices, labels < classes or < 0: not counted), B at
    // a time, as one loop on the model's device: the references and labels go up once, every batch's
    // predictions and loss sum stay on the device, and one copy brings preds (n, host) back. On CUDA the last
    // batch is padded to B (the GEMMs keep their tuned shapes). Returns the summed loss of the labelled images.
    double classify_images(int slot, const int64_t* indices, const int32_t* labels, int64_t n, int B, int32_t* preds);
    MemoryPlan memory_plan(int B, int T) const override;
    double flops_per_token(int T) const override;

protected:
    void init_base(uint64_t seed) override;

private:
    struct ConvLayer {
        ParamId w, b;
        int H, W, C, OC;  // input extent and channels; output of the pool: H/2 x W/2 x OC
        size_t conv_out, cols, pooled, argmax;  // activation arena entries
        bool cols_ready = false;  // the last forward left cols as conv2d_backward reads it (conv_pool_relu_forward)
    };
    struct DenseLayer {
        ParamId w, b;
        int in, out;
        bool relu;              // hidden layers; the class layer has none
        size_t out_act, dropped;  // dropped == out_act without dropout
    };
    // Activation arena for B images (all buffers fp32 except argmax).
    Arena layout_activations(int B) const;
    void ensure_activations(int B);
    // The batch's pixel bytes normalised into x0 on the model's device (pixels checked, one upload), or, for
    // reference rows, the named images gathered from their bound set (the refs checked, one small upload).
    void load_inputs(const int32_t* inputs, int B);
    void load_image_refs(const int32_t* inputs, int B);
    // The layers from x0 to the class logits (dense_.back().out_act).
    void run_layers(int B, bool train);
    // The labels (B) checked and copied into the device's labels; returns how many are >= 0.
    int64_t load_labels(const int32_t* labels, int B);
    Tensor act(size_t id, std::initializer_list<int64_t> dims) const;
    uint64_t layer_seed(size_t layer) const;
    // ReLU and dropout of hidden layer `l` after its linear part.
    void dense_activation_forward(const DenseLayer& l, int B, bool train, size_t index);

    ClassifierConfig cfg_;
    std::vector<ConvLayer> convs_;
    std::vector<DenseLayer> dense_;
    Arena acts_;
    int acts_B_ = 0;
    size_t x0_ = 0, pixels_ = 0, labels_ = 0, losses_ = 0, preds_ = 0, loss_sum_ = 0, dx_a_ = 0,
           dx_b_ = 0;  // arena entries
    std::array<float, 256> pixel_table_{};  // byte -> (p/255 - mean) / std
    struct BoundImages {
        ImageSource source;
        Arena device_pixels;  // CUDA: the set's bytes (as i32 words); CPU: unallocated, source.pixels is read
    };
    std::vector<BoundImages> bound_;  // by slot
    size_t refs_ = 0;                 // arena entry: the batch's (B, 4) ImageRef on the device
    int64_t max_width_ = 0;  // widest activation per image (the two gradient ping-pong buffers)
    int B_last_ = 0;
    int64_t counted_ = 0;
    float dloss_ = 0.f;
    bool train_last_ = false;
};

}  // namespace llmt::models
