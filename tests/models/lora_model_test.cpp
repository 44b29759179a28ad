// LoRA in the model layer (models/lora.h) against the identity that defines it, for every architecture
// and every linear layer: with W_eff = W + s B A, the loss equals the merged model's, and if G is the
// merged model's gradient w.r.t. W_eff then dL/dB = s G A^T and dL/dA = s B^T G. So a LoRA step on
// (base, adapters) is checked against a full fine-tuning step of the merged model, part by part (LLaMA's
// fused q|k|v and gate|up, GPT-2's Conv1D layout and its GELU after c_fc); the frozen base gets no
// gradient arena; merge_adapters() folds the same W_eff.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "models/gpt2.h"
#include "models/hf_adapter.h"
#include "models/llama.h"
#include "small_configs.h"
#include "support/error_measures.h"

namespace llmt::models {
namespace {

LlamaConfig llama_cfg(const LoraSpec& lora) {
    LlamaConfig c = test::small_llama(16);
    c.lora = lora;
    return c;
}

Gpt2Config gpt2_cfg(const LoraSpec& lora) {
    Gpt2Config c = test::small_gpt2(16);
    c.n_head = 2;
    c.lora = lora;
    return c;
}

// HF-named fp32 host copies of a store's tensors (HF layout: GPT-2's Conv1D weights (in, out)).
std::map<std::string, std::vector<float>> hf_named(const std::vector<ParamSpec>& specs, const Arena& arena) {
    std::vector<std::vector<float>> scratch;
    std::map<std::string, std::vector<float>> out;
    for (const auto& t : hf_tensors(specs, arena, scratch)) {
        const float* p = static_cast<const float*>(t.data);
        int64_t n = 1;
        for (int64_t d : t.shape) n *= d;
        out[t.name] = std::vector<float>(p, p + n);
    }
    return out;
}

std::vector<int32_t> ids(int n, int V, uint32_t seed) {
    std::mt19937 g(seed);
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = static_cast<int32_t>(g() % static_cast<uint32_t>(V));
    return v;
}

// Every trained tensor (the adapters: A and B) drawn from N(0, 0.3) by g.
template <typename M>
void randomize_adapters(M& m, std::mt19937& g) {
    std::normal_distribution<float> n(0.f, 0.3f);
    for (ParamId i = 0; i < m.param_specs().size(); ++i) {
        std::vector<float> v(static_cast<size_t>(m.params().view(i).numel()));
        for (float& x : v) x = n(g);
        m.trained().write_f32(i, v.data());
    }
}

template <typename M, typename Cfg>
void check_identity(const Cfg& lora_cfg, bool conv1d) {
    const int B = 2, T = 12;
    M lora(lora_cfg);
    lora.init_random(7);
    ASSERT_EQ(lora.base().grad_bytes(), 0u);
    // Random B as well as A (a fresh B is zero), larger than a fresh A so the delta matters.
    std::mt19937 g(11);
    randomize_adapters(lora, g);
    // The merged model, trained in full: the base's weights with W_eff folded in.
    Cfg plain_cfg = lora_cfg;
    plain_cfg.lora = LoraSpec{};
    M merged(plain_cfg), folded(lora_cfg);
    merged.init_random(7);  // same base values (the seed's streams are per tensor)
    folded.init_random(7);
    for (ParamId i = 0; i < lora.param_specs().size(); ++i)
        folded.trained().write_f32(i, lora.trained().read_f32(i).data());
    folded.merge_adapters();
    ASSERT_EQ(folded.lora(), nullptr);
    for (ParamId i = 0; i < merged.base().specs().size(); ++i)
        merged.base().write_f32(i, folded.base().read_f32(i).data());

    const auto x = ids(B * T, 50, 1), y = ids(B * T, 50, 2);
    lora.zero_grad();
    merged.zero_grad();
    const float l1 = lora.forward(x.data(), y.data(), B, T, true);
    const float l2 = merged.forward(x.data(), y.data(), B, T, true);
    lora.backward();
    merged.backward();
    // Two GEMMs (x W^T + s (x A^T) B^T) against one with W + s B A: fp32 reassociation, ~1e-7 per op.
    EXPECT_NEAR(l1, l2, 1e-5 * std::fabs(l2));

    const auto G = hf_named(merged.param_specs(), merged.grads());
    const auto P = hf_named(lora.param_specs(), lora.params());
    const auto D = hf_named(lora.param_specs(), lora.grads());
    const double s = lora.lora()->scale();
    const int r = lora.lora()->spec().r;
    int checked = 0;
    for (const auto& module : lora.lora()->modules()) {
        SCOPED_TRACE(module);
        const std::string pa = "base_model.model." + module + ".lora_A.weight",
                          pb = "base_model.model." + module + ".lora_B.weight";
        const std::vector<float>& A = P.at(pa);
        const std::vector<float>& Bm = P.at(pb);
        const std::vector<float>& Gw = G.at(module + ".weight");
        const int64_t in = static_cast<int64_t>(A.size()) / r, out = static_cast<int64_t>(Bm.size()) / r;
        ASSERT_EQ(static_cast<int64_t>(Gw.size()), in * out);
        auto gw = [&](int64_t o, int64_t i) { return conv1d ? Gw[i * out + o] : Gw[o * in + i]; };
        std::vector<double> dA(A.size(), 0.0), dB(Bm.size(), 0.0);
        for (int64_t o = 0; o < out; ++o)
            for (int64_t i = 0; i < in; ++i)
                for (int k = 0; k < r; ++k) {
                    dB[o * r + k] += s * gw(o, i) * A[k * in + i];
                    dA[k * in + i] += s * Bm[o * r + k] * gw(o, i);
                }
        // fp32 gradients of the two formulations: sums over B*T = 24 rows in another order (~1e-6).
        EXPECT_LT(support::rel_l2(D.at(pa), dA), 1e-4);
        EXPECT_LT(support::rel_l2(D.at(pb), dB), 1e-4);
        ++checked;
    }
    EXPECT_EQ(checked, static_cast<int>(lora.lora()->modules().size()));
    EXPECT_GT(checked, 0);
}

LoraSpec spec(std::vector<std::string> targets, bool rslora = false) {
    LoraSpec s;
    s.r = 3;
    s.alpha = 5;
    s.rslora = rslora;
    s.target_modules = std::move(targets);
    return s;
}

TEST(LoraModel, LlamaAllLinearMatchesTheMergedModel) {
    check_identity<Llama>(llama_cfg(spec({"all-linear"})), false);
}

TEST(LoraModel, LlamaSomePartsOfFusedLayersMatchTheMergedModel) {
    // k of q|k|v and up of gate|up only: parts that are not the first of their fused tensor.
    check_identity<Llama>(llama_cfg(spec({"k_proj", "up_proj"}, true)), false);
}

TEST(LoraModel, Gpt2AllLinearMatchesTheMergedModel) {
    check_identity<Gpt2>(gpt2_cfg(spec({"c_attn", "c_proj", "c_fc"})), true);
}

TEST(LoraModel, Gpt2RegexTargetsSelectByFullName) {
    Gpt2 m(gpt2_cfg(spec({R"(transformer\.h\.1\.(attn\.c_attn|mlp\.c_fc))"})));
    EXPECT_EQ(m.lora()->modules(),
              (std::vector<std::string>{"transformer.h.1.attn.c_attn", "transformer.h.1.mlp.c_fc"}));
    check_identity<Gpt2>(gpt2_cfg(spec({R"(transformer\.h\.1\.(attn\.c_attn|mlp\.c_fc))"})), true);
}

}  // namespace
}  // namespace llmt::models

namespace llmt::models {
namespace {

// lora.dropout: the adapters see a dropped input in training (a fixed mask per dropout seed), none in eval.
// With the seed fixed the training loss is a smooth function of A and B, so the analytic gradients must match
// central differences; eval equals the same model without dropout; another seed gives another loss.
TEST(LoraModel, DropoutGradientsMatchFiniteDifferences) {
    LoraSpec s = spec({"q_proj", "o_proj", "down_proj"});
    s.dropout = 0.3;
    LlamaConfig c = llama_cfg(s);
    Llama m(c);
    m.init_random(7);
    std::mt19937 g(13);
    randomize_adapters(m, g);
    const int B = 2, T = 10;
    const auto x = ids(B * T, 50, 3), y = ids(B * T, 50, 4);
    m.set_dropout_seed(99);
    m.zero_grad();
    const float loss = m.forward(x.data(), y.data(), B, T, true);
    m.backward();
    std::vector<float> grads(static_cast<const float*>(m.grads().data()),
                             static_cast<const float*>(m.grads().data()) + m.grads().nbytes() / sizeof(float));
    // fp32 forward, h = 1e-2: truncation and rounding both ~1e-4 (as llama_test's finite differences).
    int checked = 0;
    for (ParamId i = 0; i < m.param_specs().size(); ++i) {
        Tensor t = m.params().view(i);
        for (int k = 0; k < 3; ++k) {
            const int64_t j = static_cast<int64_t>(g() % static_cast<uint32_t>(t.numel()));
            float* w = t.ptr<float>() + j;
            const float w0 = *w, h = 1e-2f;
            *w = w0 + h;
            const double up = m.forward(x.data(), y.data(), B, T, true);
            *w = w0 - h;
            const double down = m.forward(x.data(), y.data(), B, T, true);
            *w = w0;
            const double fd = (up - down) / (2.0 * h);
            const double an = grads[m.params().entry(i).offset / sizeof(float) + static_cast<size_t>(j)];
            EXPECT_LE(std::abs(fd - an), 2e-3 + 3e-2 * std::abs(an)) << m.param_specs()[i].name << "[" << j << "]";
            ++checked;
        }
    }
    EXPECT_EQ(checked, 36);  // A and B of q|k|v, o and down in 2 layers, 3 entries each
    m.set_dropout_seed(100);
    EXPECT_NE(m.forward(x.data(), y.data(), B, T, true), loss) << "the mask did not change with the seed";
    // Eval: no dropout, the same as the model with lora.dropout 0 and the same weights.
    LoraSpec s0 = s;
    s0.dropout = 0;
    Llama m0(llama_cfg(s0));
    m0.init_random(7);
    for (ParamId i = 0; i < m.param_specs().size(); ++i) m0.trained().write_f32(i, m.trained().read_f32(i).data());
    EXPECT_EQ(m.forward(x.data(), y.data(), B, T, false), m0.forward(x.data(), y.data(), B, T, false));
}

}  // namespace
}  // namespace llmt::models
