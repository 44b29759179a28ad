#include "models/gpt2.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "config/config.h"
#include "core/check.h"
#include "core/error.h"
#include "core/rng.h"
#include "kernels/ops.h"

namespace llmt::models {

namespace {

// Activation buffers of one forward pass, in arena order. Per layer: the ones backward reads.
const char* const kLayerActs[] = {"ln1", "ln1_mean", "ln1_rstd", "qkv", "atty", "lse", "attproj", "residual2",
                                  "ln2", "ln2_mean", "ln2_rstd", "fch", "fch_gelu", "fcproj", "residual3"};

// Elements per (b, t) row of one layer's activation `name`, and whether it is fp32 (statistics) rather
// than the compute dtype.
struct ActShape {
    int64_t per_row = 0;
    bool f32 = false;
};
ActShape act_shape(const std::string& name, int64_t C, int64_t F, int64_t NH) {
    if (name == "ln1_mean" || name == "ln1_rstd" || name == "ln2_mean" || name == "ln2_rstd") return {1, true};
    if (name == "lse") return {NH, true};
    if (name == "qkv") return {3 * C, false};
    if (name == "fch" || name == "fch_gelu") return {F, false};
    return {C, false};
}

}  // namespace

Recompute recompute_from_name(const std::string& name) {
    if (name == "none") return Recompute::kNone;
    if (name == "gelu") return Recompute::kGelu;
    if (name == "all") return Recompute::kAll;
    throw InputError(fmt::format("trainer.recompute: expected one of none, gelu, all, found '{}'", name));
}

Gpt2Config Gpt2Config::from(const config::ModelConfig& m) {
    LLMT_CHECK(m.arch == "gpt2", "model.arch: expected gpt2, found {}", m.arch);
    Gpt2Config c;
    c.n_layer = m.n_layer;
    c.n_head = m.n_head;
    c.d_model = m.d_model;
    c.d_ff = m.d_ff;
    c.block_size = m.block_size;
    c.vocab_size = m.vocab_size;
    c.padded_vocab = m.padded_vocab_size();
    c.tie_embeddings = m.tie_embeddings;
    c.norm_eps = m.norm_eps;
    c.dropout = m.dropout;
    return c;
}

double Gpt2Config::flops_per_token(int T) const {
    double C = d_model, L = n_layer;
    double n = static_cast<double>(vocab_size) * C + static_cast<double>(block_size) * C +
               L * (4 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * (C * d_ff) + d_ff + C) + 2 * C;
    if (!tie_embeddings) n += static_cast<double>(vocab_size) * C;
    return 6 * n + 12 * L * C * T;
}

Gpt2::Gpt2(const Gpt2Config& cfg, Device device, DType dtype) : Gpt2(cfg, device, dtype, LayoutOnly{}) {
    params_.allocate(true, device_);
    grads_ = params_.mirror();
    if (params_lp_.size() > 0) params_lp_.allocate(true, device_);
}

Gpt2::MemoryPlan Gpt2::plan_memory(const Gpt2Config& cfg, Device device, DType dtype, int B, int T) {
    return Gpt2(cfg, device, dtype, LayoutOnly{}).memory_plan(B, T);
}

Gpt2::Gpt2(const Gpt2Config& cfg, Device device, DType dtype, LayoutOnly)
    : cfg_(cfg), device_(device), dtype_(dtype) {
    LLMT_INTERNAL_CHECK(dtype == DType::kF32 || dtype == DType::kBF16, "gpt2: compute dtype must be f32 or bf16, got {}",
               dtype_name(dtype));
    LLMT_INTERNAL_CHECK(dtype == DType::kF32 || device == Device::kCuda,
               "gpt2: bf16 mixed precision runs on CUDA only (device {})", device_name(device));
    LLMT_CHECK(cfg.n_layer > 0 && cfg.n_head > 0 && cfg.d_model > 0 && cfg.d_ff > 0 && cfg.block_size > 0 &&
                   cfg.vocab_size > 0 && cfg.padded_vocab >= cfg.vocab_size,
               "gpt2: invalid sizes (n_layer {}, n_head {}, d_model {}, d_ff {}, block_size {}, vocab {}/{})",
               cfg.n_layer, cfg.n_head, cfg.d_model, cfg.d_ff, cfg.block_size, cfg.vocab_size, cfg.padded_vocab);
    LLMT_CHECK(cfg.dropout >= 0.f && cfg.dropout < 1.f, "gpt2: dropout {} outside [0, 1)", cfg.dropout);
    LLMT_CHECK(cfg.d_model % cfg.n_head == 0, "gpt2: d_model {} not divisible by n_head {}", cfg.d_model,
               cfg.n_head);
    const int64_t C = cfg.d_model, F = cfg.d_ff, Vp = cfg.padded_vocab;
    auto add = [&](std::string name, std::vector<int64_t> shape, ParamInit init, ParamKind kind, bool transposed,
                   int64_t hf_rows = -1) {
        specs_.push_back({std::move(name), std::move(shape), init, kind, transposed, hf_rows});
    };
    add("transformer.wte.weight", {Vp, C}, ParamInit::kNormal, ParamKind::kEmbedding, false, cfg.vocab_size);
    add("transformer.wpe.weight", {cfg.block_size, C}, ParamInit::kNormal, ParamKind::kEmbedding, false);
    for (int l = 0; l < cfg.n_layer; ++l) {
        std::string p = fmt::format("transformer.h.{}.", l);
        add(p + "ln_1.weight", {C}, ParamInit::kOnes, ParamKind::kNorm, false);
        add(p + "ln_1.bias", {C}, ParamInit::kZeros, ParamKind::kNorm, false);
        add(p + "attn.c_attn.weight", {3 * C, C}, ParamInit::kNormal, ParamKind::kWeight, true);
        add(p + "attn.c_attn.bias", {3 * C}, ParamInit::kZeros, ParamKind::kBias, false);
        add(p + "attn.c_proj.weight", {C, C}, ParamInit::kNormalResidual, ParamKind::kWeight, true);
        add(p + "attn.c_proj.bias", {C}, ParamInit::kZeros, ParamKind::kBias, false);
        add(p + "ln_2.weight", {C}, ParamInit::kOnes, ParamKind::kNorm, false);
        add(p + "ln_2.bias", {C}, ParamInit::kZeros, ParamKind::kNorm, false);
        add(p + "mlp.c_fc.weight", {F, C}, ParamInit::kNormal, ParamKind::kWeight, true);
        add(p + "mlp.c_fc.bias", {F}, ParamInit::kZeros, ParamKind::kBias, false);
        add(p + "mlp.c_proj.weight", {C, F}, ParamInit::kNormalResidual, ParamKind::kWeight, true);
        add(p + "mlp.c_proj.bias", {C}, ParamInit::kZeros, ParamKind::kBias, false);
    }
    add("transformer.ln_f.weight", {C}, ParamInit::kOnes, ParamKind::kNorm, false);
    add("transformer.ln_f.bias", {C}, ParamInit::kZeros, ParamKind::kNorm, false);
    if (!cfg.tie_embeddings)
        add("lm_head.weight", {Vp, C}, ParamInit::kNormal, ParamKind::kWeight, false, cfg.vocab_size);
    for (const auto& s : specs_) params_.add(s.name, s.shape);
    if (dtype_ == DType::kBF16)
        params_lp_.add("params", {static_cast<int64_t>(params_.nbytes() / sizeof(float))}, DType::kBF16);
}

Tensor Gpt2::compute_params() const { return params_lp_.allocated() ? params_lp_.view(size_t{0}) : Tensor(); }

void Gpt2::sync_compute_params() {
    if (!params_lp_.allocated()) return;
    kernels::convert(params_lp_.view(size_t{0}),
                     Tensor(params_.data(), {static_cast<int64_t>(params_.nbytes() / sizeof(float))}, DType::kF32,
                            device_));
}

Tensor Gpt2::weight(const std::string& name) const {
    if (!params_lp_.allocated()) return params_.view(name);
    const auto& e = params_.entry(params_.index(name));
    Tensor t = params_.view(name);
    t.data = static_cast<uint16_t*>(params_lp_.data()) + e.offset / sizeof(float);  // same element index
    t.dtype = DType::kBF16;
    return t;
}

int64_t Gpt2::num_parameters() const {
    int64_t n = 0;
    for (const auto& s : specs_) {
        int64_t rows = s.hf_rows >= 0 ? s.hf_rows : s.shape[0];
        int64_t k = rows;
        for (size_t i = 1; i < s.shape.size(); ++i) k *= s.shape[i];
        n += k;
    }
    return n;
}

void Gpt2::init_random(uint64_t seed) {
    const double std_resid = 0.02 / std::sqrt(2.0 * cfg_.n_layer);
    for (size_t i = 0; i < specs_.size(); ++i) {
        const auto& s = specs_[i];
        Tensor t = params_.view(i);
        int64_t n = t.numel();
        // Device parameters are drawn on the host and copied: the same values on every backend.
        std::vector<float> host(device_ == Device::kCpu ? 0 : static_cast<size_t>(n));
        float* p = device_ == Device::kCpu ? t.ptr<float>() : host.data();
        switch (s.init) {
            case ParamInit::kZeros: std::memset(p, 0, static_cast<size_t>(n) * sizeof(float)); break;
            case ParamInit::kOnes:
                for (int64_t k = 0; k < n; ++k) p[k] = 1.f;
                break;
            case ParamInit::kNormal:
            case ParamInit::kNormalResidual: {
                double sd = s.init == ParamInit::kNormal ? 0.02 : std_resid;
                CounterRng rng(seed, i);  // one stream per tensor: independent of threads and order
                int64_t live = n;
                if (s.hf_rows >= 0) live = s.hf_rows * (n / s.shape[0]);  // padding rows stay 0
#pragma omp parallel for schedule(static)
                for (int64_t k = 0; k < live; ++k) p[k] = static_cast<float>(sd * rng.normal(static_cast<uint64_t>(k)));
                std::memset(p + live, 0, static_cast<size_t>(n - live) * sizeof(float));
                break;
            }
        }
        if (device_ != Device::kCpu) kernels::copy(t, Tensor(host.data(), {n}));
    }
    sync_compute_params();
}

bool Gpt2::kept_per_layer(const std::string& name) const {
    switch (cfg_.recompute) {
        case Recompute::kNone: return true;
        case Recompute::kGelu: return name != "fch_gelu";
        case Recompute::kAll: return name == "residual3";  // the next block's input
    }
    return true;
}

std::string Gpt2::act_name(int l, const std::string& name) const {
    return kept_per_layer(name) ? fmt::format("h{}.{}", l, name) : "blk." + name;
}

Arena Gpt2::activation_layout(int B, int T) const {
    const int64_t BT = static_cast<int64_t>(B) * T, C = cfg_.d_model, F = cfg_.d_ff, NH = cfg_.n_head;
    Arena a;
    // Activations (and their gradients) in the compute dtype; statistics and losses in fp32.
    // add/add_f32 take elements per (b, t) row. Sizes come from the config (B, T and widths up to the
    // schema's bounds): a product beyond int64 is refused rather than wrapped into a small allocation.
    auto rows = [&](int64_t width) {
        int64_t n = 0;
        LLMT_CHECK(!__builtin_mul_overflow(BT, width, &n),
                   "gpt2: activations of B*T = {} rows x {} elements overflow 64-bit sizes; lower "
                   "trainer.micro_batch_size or the model's widths",
                   BT, width);
        return n;
    };
    auto add = [&](const std::string& name, int64_t width) { a.add(name, {rows(width)}, dtype_); };
    auto add_f32 = [&](const std::string& name, int64_t width) { a.add(name, {rows(width)}, DType::kF32); };
    // The projections' outputs are kept apart from the residual stream only for dropout; without it each
    // is added to the stream inside its matmul (forward()).
    auto present = [&](const std::string& s) { return !((s == "attproj" || s == "fcproj") && cfg_.dropout <= 0.f); };
    auto add_act = [&](const std::string& key, const std::string& s) {
        const ActShape sh = act_shape(s, C, F, NH);
        if (sh.f32) add_f32(key, sh.per_row);
        else add(key, sh.per_row);
    };
    add("encoded", C);
    for (int l = 0; l < cfg_.n_layer; ++l)
        for (const char* nm : kLayerActs)
            if (present(nm) && kept_per_layer(nm)) add_act(act_name(l, nm), nm);
    // trainer.recompute: one block's worth of the activations not kept per layer, rewritten by every layer.
    for (const char* nm : kLayerActs)
        if (present(nm) && !kept_per_layer(nm)) add_act(act_name(0, nm), nm);
    add("lnf", C);
    add_f32("lnf_mean", 1);
    add_f32("lnf_rstd", 1);
    add("logits", cfg_.padded_vocab);
    add_f32("losses", 1);
    // Backward scratch, reused by every layer (llm.c's CUDA layout): the residual-stream gradient and
    // one buffer per activation width.
    add("d_residual", C);
    add("d_c", C);
    add("d_c2", C);
    add("d_qkv", 3 * C);
    add("d_f", F);
    a.add("inputs", {BT}, DType::kI32);  // token ids and targets where the kernels read them
    a.add("targets", {BT}, DType::kI32);
    return a;
}

void Gpt2::ensure_activations(int B, int T) {
    if (acts_.allocated() && static_cast<int64_t>(B) * T <= static_cast<int64_t>(act_B_) * act_T_) return;
    acts_ = Arena();  // free the old buffer first: on a GPU the two need not fit together
    Arena a = activation_layout(B, T);
    a.allocate(false, device_);
    acts_ = std::move(a);
    act_B_ = B;
    act_T_ = T;
}

namespace {

// A (B,T,...) view of the first B*T*width elements of an activation buffer (in the buffer's dtype).
Tensor btc(const Arena& a, const std::string& name, int B, int T, int64_t width) {
    const Tensor v = a.view(name);
    return Tensor(v.data, {B, T, width}, v.dtype, a.device());
}
Tensor bt(const Arena& a, const std::string& name, int B, int T) {
    const Tensor v = a.view(name);
    return Tensor(v.data, {B, T}, v.dtype, a.device());
}

}  // namespace

void Gpt2::block_forward(int l, Tensor residual, bool to_residual3) {
    const int B = B_, T = T_;
    const int64_t C = cfg_.d_model, F = cfg_.d_ff, NH = cfg_.n_head;
    const std::string p = fmt::format("transformer.h.{}.", l);
    auto P = [&](const std::string& n) { return weight(n); };
    auto A = [&](const char* n, int64_t w) { return btc(acts_, act_name(l, n), B, T, w); };
    auto S = [&](const char* n) { return bt(acts_, act_name(l, n), B, T); };
    // Dropout in place on each residual branch before it is added; nothing that backward reads is
    // overwritten (matmul backward reads inputs, never outputs). The masks are stateless, so a re-run
    // block (trainer.recompute: all) draws the same ones.
    auto drop = [&](Tensor t, int site) {
        if (dropped_) kernels::dropout_forward(t, t, cfg_.dropout, dropout_seed_ + static_cast<uint64_t>(site));
    };
    kernels::layernorm_forward(A("ln1", C), S("ln1_mean"), S("ln1_rstd"), residual, P(p + "ln_1.weight"),
                               P(p + "ln_1.bias"), cfg_.norm_eps);
    kernels::matmul_forward(A("qkv", 3 * C), A("ln1", C), P(p + "attn.c_attn.weight"), P(p + "attn.c_attn.bias"));
    Tensor lse(acts_.view(act_name(l, "lse")).data, {B, NH, T}, DType::kF32, device_);
    kernels::attention_forward(A("atty", C), lse, A("qkv", 3 * C), static_cast<int>(NH), static_cast<int>(NH));
    // residual2 = residual + attproj (+ dropout on the branch first, when training with it).
    if (dropped_) {
        kernels::matmul_forward(A("attproj", C), A("atty", C), P(p + "attn.c_proj.weight"), P(p + "attn.c_proj.bias"));
        drop(A("attproj", C), 1 + 2 * l);
        kernels::residual_forward(A("residual2", C), residual, A("attproj", C));
    } else {
        kernels::matmul_forward(A("residual2", C), A("atty", C), P(p + "attn.c_proj.weight"), P(p + "attn.c_proj.bias"),
                                residual);
    }
    kernels::layernorm_forward(A("ln2", C), S("ln2_mean"), S("ln2_rstd"), A("residual2", C), P(p + "ln_2.weight"),
                               P(p + "ln_2.bias"), cfg_.norm_eps);
    // fch_gelu = GELU(fch), fch = ln2 @ W^T + b (one cuBLASLt call with the GELU epilogue in bf16).
    kernels::matmul_forward_gelu(A("fch_gelu", F), A("fch", F), A("ln2", C), P(p + "mlp.c_fc.weight"),
                                 P(p + "mlp.c_fc.bias"));
    if (!to_residual3) return;
    if (dropped_) {
        kernels::matmul_forward(A("fcproj", C), A("fch_gelu", F), P(p + "mlp.c_proj.weight"), P(p + "mlp.c_proj.bias"));
        drop(A("fcproj", C), 2 + 2 * l);
        kernels::residual_forward(A("residual3", C), A("residual2", C), A("fcproj", C));
    } else {
        kernels::matmul_forward(A("residual3", C), A("fch_gelu", F), P(p + "mlp.c_proj.weight"),
                                P(p + "mlp.c_proj.bias"), A("residual2", C));
    }
}

float Gpt2::forward(const int32_t* inputs, const int32_t* targets, int B, int T, bool train, float loss_scale) {
    LLMT_INTERNAL_CHECK(B > 0 && T > 0, "gpt2 forward: B and T must be positive (B {}, T {})", B, T);
    LLMT_CHECK(T <= cfg_.block_size, "gpt2 forward: sequence length {} exceeds model.block_size {}", T,
               cfg_.block_size);
    LLMT_INTERNAL_CHECK(!train || targets, "gpt2 forward: training needs targets");
    ensure_activations(B, T);
    B_ = B;
    T_ = T;
    const int64_t C = cfg_.d_model, Vp = cfg_.padded_vocab;
    const int V = cfg_.vocab_size;
    inputs_.assign(inputs, inputs + static_cast<int64_t>(B) * T);
    if (device_ != Device::kCpu) {  // device kernels do not range-check ids (kernels/ops.h)
        for (int64_t i = 0; i < static_cast<int64_t>(B) * T; ++i) {
            LLMT_CHECK(inputs[i] >= 0 && inputs[i] < cfg_.padded_vocab,
                       "gpt2 forward: token id {} at position {} is outside [0, {})", inputs[i], i, cfg_.padded_vocab);
            LLMT_CHECK(!targets || targets[i] < V, "gpt2 forward: target {} at position {} is >= V = {}",
                       targets[i], i, V);
        }
    }
    Tensor inp = bt(acts_, "inputs", B, T);
    kernels::copy(inp, Tensor(inputs_.data(), {B, T}, DType::kI32));

    auto P = [&](const std::string& n) { return weight(n); };
    kernels::encoder_forward(btc(acts_, "encoded", B, T, C), inp, P("transformer.wte.weight"),
                             P("transformer.wpe.weight"));
    // Dropout in place on the embeddings (site 0) and inside each block (block_forward).
    dropped_ = train && cfg_.dropout > 0.f;
    if (dropped_) kernels::dropout_forward(btc(acts_, "encoded", B, T, C), btc(acts_, "encoded", B, T, C),
                                           cfg_.dropout, dropout_seed_);
    Tensor residual = btc(acts_, "encoded", B, T, C);
    for (int l = 0; l < cfg_.n_layer; ++l) {
        block_forward(l, residual, /*to_residual3=*/true);
        residual = btc(acts_, act_name(l, "residual3"), B, T, C);
    }
    kernels::layernorm_forward(btc(acts_, "lnf", B, T, C), bt(acts_, "lnf_mean", B, T), bt(acts_, "lnf_rstd", B, T),
                               residual, P("transformer.ln_f.weight"), P("transformer.ln_f.bias"), cfg_.norm_eps);
    Tensor logits = btc(acts_, "logits", B, T, Vp);
    Tensor head = cfg_.tie_embeddings ? P("transformer.wte.weight") : P("lm_head.weight");
    kernels::matmul_forward(logits, btc(acts_, "lnf", B, T, C), head, Tensor());
    has_grad_ = false;
    if (!targets) return 0.f;

    Tensor tgt = bt(acts_, "targets", B, T);
    kernels::copy(tgt, Tensor(const_cast<int32_t*>(targets), {B, T}, DType::kI32));
    Tensor losses = bt(acts_, "losses", B, T);
    int64_t counted = 0;
    for (int64_t i = 0; i < static_cast<int64_t>(B) * T; ++i) counted += targets[i] >= 0;
    LLMT_CHECK(counted > 0, "gpt2 forward: every target is ignored (< 0)");
    if (train) {
        // d(mean loss)/d(loss_i) = 1/counted, times the caller's scale (1/grad_accum, ...).
        kernels::classifier_forward_backward(losses, logits, tgt, loss_scale / static_cast<float>(counted), V);
        has_grad_ = true;
    } else {
        kernels::classifier_forward(losses, logits, tgt, V);
    }
    std::vector<float> host_losses(static_cast<size_t>(B) * T);
    kernels::copy(Tensor(host_losses.data(), {B, T}), losses);
    const float* lp = host_losses.data();
    double sum = 0;
    for (int64_t i = 0; i < static_cast<int64_t>(B) * T; ++i)
        if (targets[i] >= 0) sum += lp[i];
    return static_cast<float>(sum / static_cast<double>(counted));
}

void Gpt2::backward() {
    LLMT_INTERNAL_CHECK(has_grad_, "gpt2 backward: call forward(..., train = true) first");
    const int B = B_, T = T_;
    const int64_t C = cfg_.d_model, F = cfg_.d_ff, NH = cfg_.n_head, Vp = cfg_.padded_vocab;
    auto P = [&](const std::string& n) { return weight(n); };
    auto G = [&](const std::string& n) { return grads_.view(n); };
    Tensor dres = btc(acts_, "d_residual", B, T, C);
    Tensor dc = btc(acts_, "d_c", B, T, C), dc2 = btc(acts_, "d_c2", B, T, C);
    Tensor dqkv = btc(acts_, "d_qkv", B, T, 3 * C);
    Tensor df = btc(acts_, "d_f", B, T, F);

    // logits = lnf @ head^T: dlogits sit in the logits buffer (written by the fused classifier).
    Tensor dlogits = btc(acts_, "logits", B, T, Vp);
    std::string head = cfg_.tie_embeddings ? "transformer.wte.weight" : "lm_head.weight";
    kernels::matmul_backward(dc, G(head), Tensor(), dlogits, btc(acts_, "lnf", B, T, C), P(head));
    std::string last = cfg_.n_layer > 0 ? fmt::format("h{}.residual3", cfg_.n_layer - 1) : "encoded";
    kernels::zero(dres);  // the residual stream accumulates (+=)
    // d(branch before dropout) = dropout'(d branch) with the forward's mask, into a scratch buffer: the
    // residual stream's own gradient passes the add unchanged. Without dropout the branch sees dres.
    auto undrop = [&](Tensor scratch, int site) {
        if (!dropped_) return dres;
        kernels::dropout_backward(scratch, dres, cfg_.dropout, dropout_seed_ + static_cast<uint64_t>(site));
        return scratch;
    };
    // Without dropout each projection's output gradient is the residual stream's gradient as a LayerNorm
    // backward leaves it, so that LayerNorm's pass sums its columns into the projection's bias gradient
    // (colsum_of: the c_proj bias whose gradient it is, or none), and matmul_backward skips it (proj_dbias).
    auto colsum_of = [&](const std::string& bias) { return dropped_ ? Tensor() : G(bias); };
    auto proj_dbias = [&](const std::string& bias) { return dropped_ ? G(bias) : Tensor(); };
    const std::string top = fmt::format("transformer.h.{}.mlp.c_proj.bias", cfg_.n_layer - 1);
    kernels::layernorm_backward(dres, G("transformer.ln_f.weight"), G("transformer.ln_f.bias"), dc,
                                btc(acts_, last, B, T, C), P("transformer.ln_f.weight"), bt(acts_, "lnf_mean", B, T),
                                bt(acts_, "lnf_rstd", B, T), cfg_.n_layer > 0 ? colsum_of(top) : Tensor());
    // The arena holds wte, wpe, the layers in order, ln_f, then lm_head: what backward has finished
    // is always a suffix of it.
    auto ready_from = [&](const std::string& first_param) {
        if (grads_ready_) grads_ready_(grads_.entry(grads_.index(first_param)).offset);
    };
    ready_from("transformer.ln_f.weight");
    for (int l = cfg_.n_layer - 1; l >= 0; --l) {
        const std::string p = fmt::format("transformer.h.{}.", l);
        auto A = [&](const char* n, int64_t w) { return btc(acts_, act_name(l, n), B, T, w); };
        auto S = [&](const char* n) { return bt(acts_, act_name(l, n), B, T); };
        Tensor residual = l == 0 ? btc(acts_, "encoded", B, T, C) : btc(acts_, fmt::format("h{}.residual3", l - 1), B, T, C);
        // trainer.recompute: the same kernels on the same inputs as the forward, so what they rewrite is
        // bit for bit what the forward wrote (the kernels are deterministic; one exception: bf16 on CUDA
        // fuses the forward's GELU into the GEMM epilogue from the fp32 sum, while gelu_forward starts from
        // the bf16-rounded pre-activation, so kGelu there differs by bf16 rounding).
        if (cfg_.recompute == Recompute::kAll) block_forward(l, residual, /*to_residual3=*/false);
        if (cfg_.recompute == Recompute::kGelu) kernels::gelu_forward(A("fch_gelu", F), A("fch", F));
        // dres holds d residual3 = d fcproj = d residual2 (residual add passes it through).
        // df = d fch (through the GELU: the DGELU epilogue in bf16).
        kernels::matmul_backward_gelu(df, A("fch", F), G(p + "mlp.c_proj.weight"), proj_dbias(p + "mlp.c_proj.bias"),
                                      undrop(dc, 2 + 2 * l), A("fch_gelu", F), P(p + "mlp.c_proj.weight"));
        kernels::matmul_backward(dc, G(p + "mlp.c_fc.weight"), G(p + "mlp.c_fc.bias"), df, A("ln2", C),
                                 P(p + "mlp.c_fc.weight"));
        kernels::layernorm_backward(dres, G(p + "ln_2.weight"), G(p + "ln_2.bias"), dc, A("residual2", C),
                                    P(p + "ln_2.weight"), S("ln2_mean"), S("ln2_rstd"),
                                    colsum_of(p + "attn.c_proj.bias"));
        // dres now holds d residual2 = d attproj = d residual.
        kernels::matmul_backward(dc2, G(p + "attn.c_proj.weight"), proj_dbias(p + "attn.c_proj.bias"),
                                 undrop(dc, 1 + 2 * l), A("atty", C), P(p + "attn.c_proj.weight"));
        // The qkv bias gradient (dqkv's column sums) comes out of the attention backward's own passes.
        kernels::attention_backward(dqkv, dc2, A("qkv", 3 * C), A("atty", C),
                                    Tensor(acts_.view(act_name(l, "lse")).data, {B, NH, T}, DType::kF32, device_),
                                    static_cast<int>(NH), static_cast<int>(NH), G(p + "attn.c_attn.bias"));
        kernels::matmul_backward(dc, G(p + "attn.c_attn.weight"), Tensor(), dqkv, A("ln1", C),
                                 P(p + "attn.c_attn.weight"));
        // dres becomes d residual: layer l-1's mlp.c_proj output gradient (none below layer 0).
        const std::string below = fmt::format("transformer.h.{}.mlp.c_proj.bias", l - 1);
        kernels::layernorm_backward(dres, G(p + "ln_1.weight"), G(p + "ln_1.bias"), dc, residual, P(p + "ln_1.weight"),
                                    S("ln1_mean"), S("ln1_rstd"), l > 0 ? colsum_of(below) : Tensor());
        ready_from(p + "ln_1.weight");
    }
    Tensor inp = bt(acts_, "inputs", B, T);
    if (dropped_) kernels::dropout_backward(dres, dres, cfg_.dropout, dropout_seed_);
    kernels::encoder_backward(G("transformer.wte.weight"), G("transformer.wpe.weight"), dres, inp);
    if (grads_ready_) grads_ready_(0);
    has_grad_ = false;
}

const float* Gpt2::logits() const {
    LLMT_INTERNAL_CHECK(device_ == Device::kCpu, "gpt2: logits() reads host memory; this model is on {}", device_name(device_));
    return static_cast<const float*>(acts_.view("logits").data);
}

const float* Gpt2::last_logits(int b) const {
    return logits() + (static_cast<int64_t>(b) * T_ + (T_ - 1)) * cfg_.padded_vocab;
}

Gpt2::MemoryPlan Gpt2::memory_plan(int B, int T) const {
    MemoryPlan m;
    m.params = params_.nbytes() + params_lp_.nbytes();
    m.grads = params_.nbytes();  // grads_ mirrors params_ (and is not allocated in a plan)
    m.activations = activation_layout(B, T).nbytes();
    return m;
}

}  // namespace llmt::models
