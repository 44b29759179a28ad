// The fused LM head's test cases, shared by lm_head_test (CPU) and lm_head_cuda_test (CUDA): every language
// family of the registry, tied and untied heads, full fine-tuning and LoRA on every linear layer (the head
// itself is never adapted, so its chunks feed the adapters upstream), packed rows (positions restarting
// mid-row) for the rotary families, and ignored targets as an assistant-only mask leaves them. One case
// runs forward + backward under a forced LLMTRAIN_LM_HEAD_ROWS and returns the loss and every trained
// gradient, so a test compares the chunked head with one chunk of all rows (the logits materialised).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "config/arch_table.h"
#include "config/loader.h"
#include "core/knobs.h"
#include "kernels/ops.h"
#include "models/lm_head.h"
#include "models/registry.h"
#include "support/error_measures.h"

namespace llmt::models::head_cases {

struct HeadCase {
    std::string arch;
    bool tied = true, lora = false, packed = false;
    std::string name() const {
        return fmt::format("{} {} {}{}", arch, tied ? "tied" : "untied", lora ? "lora" : "full",
                           packed ? " packed" : "");
    }
};

inline std::vector<HeadCase> all_head_cases() {
    std::vector<HeadCase> out;
    for (const auto& a : config::arch_table()) {
        if (a.kind != config::ArchKind::kLanguageModel) continue;
        for (bool tied : {true, false})
            for (bool lora : {false, true}) out.push_back({a.name, tied, lora, a.rotary_positions});
    }
    return out;
}

// The model's widths: small on the CPU; on CUDA head size 64 (the flash and cuDNN attention paths) and
// widths that are multiples of 8 (cuBLASLt's bf16 alignment).
struct CaseShape {
    int d_model = 32, d_ff = 48, vocab = 50;
};

// The gtest name of a case: its name with every other character as '_'.
inline std::string test_name(const ::testing::TestParamInfo<HeadCase>& info) {
    std::string n = info.param.name();
    for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return n;
}

// B = 2 rows of T = 24: 48 head rows, so LLMTRAIN_LM_HEAD_ROWS=16 gives three chunks.
inline constexpr int kB = 2, kT = 24;

struct HeadRun {
    float loss = 0;
    std::vector<std::string> names;         // the trained tensors (adapters under LoRA)
    std::vector<std::vector<float>> grads;  // their gradients, fp32 on the host
};

inline std::unique_ptr<Model> make_case_model(const HeadCase& c, Device device, DType dtype, CaseShape sh) {
    const auto* arch = config::find_arch(c.arch);
    std::string yaml = fmt::format(
        "model: {{arch: {}, n_layer: 2, n_head: 4, {}d_model: {}, d_ff: {}, vocab_size: {}, block_size: 32, "
        "tie_embeddings: {}}}\ndata: {{source: shards, train_shards: t.bin, val_shards: v.bin}}\n",
        c.arch, arch && arch->grouped_query ? "n_kv_head: 2, " : "", sh.d_model, sh.d_ff, sh.vocab,
        c.tied ? "true" : "false");
    if (c.lora) yaml += "lora: {r: 4, alpha: 8, target_modules: [all-linear]}\n";
    return make_model(config::load_config_string(yaml, "lm_head_case.yaml"), device, dtype);
}

// Random trained parameters (under LoRA both adapter factors, so every adapter gradient is non-zero; PEFT's
// B = 0 would leave A's gradient 0 and the comparison empty), from `seed`.
inline void randomise_trained(Model& m, uint32_t seed) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.f, 0.1f);
    Arena& p = m.params();
    for (size_t i = 0; i < p.size(); ++i) {
        const Tensor v = p.view(i);
        std::vector<float> h(static_cast<size_t>(v.numel()));
        for (auto& x : h) x = d(g);
        kernels::copy(Tensor(v.data, {v.numel()}, v.dtype, v.device), Tensor(h.data(), {v.numel()}));
    }
    m.sync_compute_params();
}

inline HeadRun run_head_case(const HeadCase& c, Device device, DType dtype, const char* rows, CaseShape sh = {}) {
    const ScopedKnob knob(Knob::kLmHeadRows, rows);
    const auto model = make_case_model(c, device, dtype, sh);
    Model& m = *model;
    m.init_random(11);
    randomise_trained(m, 12);
    const int V = m.dims().vocab_size;
    std::mt19937 g(13);
    std::vector<int32_t> in(kB * kT), tg(kB * kT), pos(kB * kT);
    for (auto& x : in) x = static_cast<int32_t>(g() % static_cast<uint32_t>(V));
    for (auto& x : tg) x = static_cast<int32_t>(g() % static_cast<uint32_t>(V));
    for (int b = 0; b < kB; ++b)
        for (int t = 0; t < kT; ++t) {
            // Packing: a second example from t = 9 (row 0) / t = 15 (row 1), each with its prompt's targets
            // ignored (an assistant-only mask), plus the last target of each row (no next token).
            const int start = t < 9 + 6 * b ? 0 : 9 + 6 * b;
            pos[static_cast<size_t>(b * kT + t)] = c.packed ? t - start : t;
            if (t - start < 3 || t == kT - 1) tg[static_cast<size_t>(b * kT + t)] = -1;
        }
    m.zero_grad();
    HeadRun r;
    r.loss = m.forward(in.data(), tg.data(), kB, kT, true, 1.f, c.packed ? pos.data() : nullptr);
    m.backward();
    for (size_t i = 0; i < m.param_specs().size(); ++i) {
        const Tensor v = m.grads().view(i);
        std::vector<float> h(static_cast<size_t>(v.numel()));
        kernels::copy(Tensor(h.data(), {v.numel()}), Tensor(v.data, {v.numel()}, v.dtype, v.device));
        r.names.push_back(m.param_specs()[i].name);
        r.grads.push_back(std::move(h));
    }
    return r;
}

struct Problem {
    int64_t BT = 37, C = 24, Vp = 64;
    int V = 50;
    float scale = 0.37f;
    std::vector<float> x, w;
    std::vector<int32_t> targets;
};

// x (37, C), W (64, C) with 14 padding rows, every fourth target ignored.
inline Problem problem(uint32_t seed, int64_t C = 24) {
    Problem p;
    p.C = C;
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.f, 1.f);
    p.x.resize(static_cast<size_t>(p.BT * p.C));
    p.w.resize(static_cast<size_t>(p.Vp * p.C));
    for (auto& v : p.x) v = d(g);
    for (auto& v : p.w) v = 0.3f * d(g);  // padding rows too: the head must ignore their logits
    p.targets.resize(static_cast<size_t>(p.BT));
    for (auto& t : p.targets) t = static_cast<int32_t>(g() % static_cast<uint32_t>(p.V));
    for (int64_t i = 0; i < p.BT; i += 4) p.targets[static_cast<size_t>(i)] = -1;  // ignored rows
    return p;
}

struct Reference {
    std::vector<double> losses, dx, dw;
};

// Every logit of every row in float64, then the softmax cross-entropy over the first V columns.
inline Reference reference(const Problem& p) {
    Reference r;
    r.losses.assign(static_cast<size_t>(p.BT), 0.0);
    r.dx.assign(p.x.size(), 0.0);
    r.dw.assign(p.w.size(), 0.0);
    std::vector<double> z(static_cast<size_t>(p.V));
    for (int64_t i = 0; i < p.BT; ++i) {
        const int32_t t = p.targets[static_cast<size_t>(i)];
        if (t < 0) continue;
        double m = -INFINITY;
        for (int v = 0; v < p.V; ++v) {
            double s = 0;
            for (int64_t c = 0; c < p.C; ++c) s += static_cast<double>(p.x[i * p.C + c]) * p.w[v * p.C + c];
            z[static_cast<size_t>(v)] = s;
            m = std::max(m, s);
        }
        double sum = 0;
        for (double s : z) sum += std::exp(s - m);
        r.losses[static_cast<size_t>(i)] = m + std::log(sum) - z[static_cast<size_t>(t)];
        for (int v = 0; v < p.V; ++v) {
            const double g = p.scale * (std::exp(z[static_cast<size_t>(v)] - m) / sum - (v == t ? 1.0 : 0.0));
            for (int64_t c = 0; c < p.C; ++c) {
                r.dx[static_cast<size_t>(i * p.C + c)] += g * p.w[v * p.C + c];
                r.dw[static_cast<size_t>(v * p.C + c)] += g * p.x[i * p.C + c];
            }
        }
    }
    return r;
}

// A problem's numbers rounded to bf16 (nearest even), so a bf16 run is compared with the reference of the
// values it actually multiplies.
inline Problem rounded_to_bf16(Problem p) {
    auto round = [](float& v) {
        uint32_t u;
        std::memcpy(&u, &v, 4);
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        std::memcpy(&v, &u, 4);
    };
    for (auto& v : p.x) round(v);
    for (auto& v : p.w) round(v);
    return p;
}

struct HeadOut {
    std::vector<float> losses, dx, dw;
};

// lm_head_loss on `device` in `dtype` with a scratch of `rows` rows; train: dx and dW too (dW from 0).
inline HeadOut run_head_problem(const Problem& p, Device device, DType dtype, int64_t rows, bool train) {
    Arena a;
    const size_t x = a.add("x", {p.BT, p.C}, dtype), w = a.add("w", {p.Vp, p.C}, dtype);
    const size_t logits = a.add("logits", {rows, p.Vp}, dtype), losses = a.add("losses", {p.BT});
    const size_t targets = a.add("targets", {p.BT}, DType::kI32), dx = a.add("dx", {p.BT, p.C}, dtype);
    const size_t dw = a.add("dw", {p.Vp, p.C}), x32 = a.add("x32", {p.BT, p.C}), w32 = a.add("w32", {p.Vp, p.C});
    a.allocate(true, device);
    auto from_host = [&](size_t i, const void* h, DType dt) {
        const Tensor v = a.view(i);
        kernels::copy(v, Tensor(const_cast<void*>(h), {v.dim(0), v.numel() / v.dim(0)}, dt));
    };
    from_host(x32, p.x.data(), DType::kF32);
    from_host(w32, p.w.data(), DType::kF32);
    auto cast = [](Tensor dst, Tensor src) {  // fp32 -> the compute dtype, or back
        if (dst.dtype == src.dtype) kernels::copy(dst, src);
        else kernels::convert(dst, src);
    };
    cast(a.view(x), a.view(x32));
    cast(a.view(w), a.view(w32));
    from_host(targets, p.targets.data(), DType::kI32);
    const std::vector<float> poison(static_cast<size_t>(p.BT * p.C), 99.f);  // dx must be written, not added
    from_host(x32, poison.data(), DType::kF32);
    cast(a.view(dx), a.view(x32));
    LmHeadIo io;
    io.x = a.view(x);
    io.weight = a.view(w);
    io.logits = a.view(logits);
    io.losses = a.view(losses);
    io.targets = a.view(targets);
    if (train) {
        io.dx = a.view(dx);
        io.dweight = a.view(dw);
    }
    lm_head_loss(io, p.V, p.scale);
    HeadOut out;
    auto to_host = [&](size_t i) {
        Tensor v = a.view(i);
        if (v.dtype != DType::kF32) {
            cast(a.view(x32), v);
            v = a.view(x32);
        }
        std::vector<float> h(static_cast<size_t>(v.numel()));
        kernels::copy(Tensor(h.data(), {v.numel()}), Tensor(v.data, {v.numel()}, v.dtype, v.device));
        return h;
    };
    out.losses = to_host(losses);
    if (train) {
        out.dx = to_host(dx);
        out.dw = to_host(dw);
    }
    return out;
}

using support::rel_l2;

}  // namespace llmt::models::head_cases
