// LLaMA and the families on its graph (Qwen2's q/k/v biases, Qwen3's per-head q/k norms, Mistral's
// sliding window) on the CPU (models/llama.h), without a reference implementation: gradients by central
// finite differences per family, trainer.recompute bit-exactness, the KV-cache decoder against the full
// forward, packed examples, the HF tensors written and read back bit for bit, and load errors naming the
// tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/safetensors.h"
#include "models/hf_adapter.h"
#include "models/llama.h"
#include "small_configs.h"
#include "support/error_measures.h"

namespace llmt::models {
namespace {

// The families on the LLaMA graph, as LlamaConfig variants (their ArchSpecs set the same fields).
struct Family {
    const char* name;
    void (*apply)(LlamaConfig&);
};
const Family kFamilies[] = {
    {"llama", [](LlamaConfig&) {}},
    {"qwen2", [](LlamaConfig& c) { c.arch = "qwen2"; c.qkv_bias = true; }},
    // head_dim 16 != 32 / 4 heads.
    {"qwen3", [](LlamaConfig& c) { c.arch = "qwen3"; c.qk_norm = true; c.head_dim = 16; }},
    // A window of 5 under sequences of 12-16: it hides keys in every test below; head_dim 12 != 32 / 4.
    {"mistral", [](LlamaConfig& c) { c.arch = "mistral"; c.sliding_window = 5; c.head_dim = 12; }},
};
constexpr int kNumFamilies = static_cast<int>(std::size(kFamilies));

int family_of(const std::string& name) {
    for (int i = 0; i < kNumFamilies; ++i)
        if (name == kFamilies[i].name) return i;
    throw std::invalid_argument("no family " + name);
}

LlamaConfig tiny(bool tied, Recompute r = Recompute::kNone, int family = 0) {
    LlamaConfig c = test::small_llama(16);
    c.tie_embeddings = tied;
    c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 4};
    c.recompute = r;
    kFamilies[family].apply(c);
    return c;
}

// Weights drawn at std 0.02 then scaled up so attention and the MLP are far from linear.
void randomize(Llama& m, uint64_t seed) {
    m.init_random(seed);
    float* p = static_cast<float*>(m.params().data());
    const size_t n = m.params().nbytes() / sizeof(float);
    for (size_t i = 0; i < n; ++i) p[i] *= 5.f;
    // Norm weights 1 * 5 = 5 would saturate; bring them back near 1.
    for (size_t i = 0; i < m.param_specs().size(); ++i)
        if (m.param_specs()[i].kind == ParamKind::kNorm) {
            Tensor t = m.params().view(i);
            for (int64_t k = 0; k < t.numel(); ++k) t.ptr<float>()[k] = 1.f + 0.02f * static_cast<float>(k % 7);
        } else if (m.param_specs()[i].kind == ParamKind::kBias) {  // zeros at init: give them values
            Tensor t = m.params().view(i);
            for (int64_t k = 0; k < t.numel(); ++k) t.ptr<float>()[k] = 0.1f * static_cast<float>(k % 5 - 2);
        }
}

std::vector<int32_t> random_ids(int n, int V, uint32_t seed) {
    std::mt19937 g(seed);
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = static_cast<int32_t>(g() % static_cast<uint32_t>(V));
    return v;
}

class LlamaGradients : public ::testing::TestWithParam<std::tuple<bool, int>> {};

// d loss / d w by central differences on a few coordinates of every tensor. fp32 forward: with h = 1e-2 the
// truncation error (O(h^2) times third derivatives of O(1)) and the rounding noise (~1e-7 x loss / h) are
// both ~1e-4 absolute, so |fd - analytic| <= 2e-3 + 3e-2 |analytic| separates rounding from a wrong term
// (a missing path is off by the whole gradient).
TEST_P(LlamaGradients, MatchFiniteDifferences) {
    const int B = 2, T = 12;
    Llama m(tiny(std::get<0>(GetParam()), Recompute::kNone, std::get<1>(GetParam())));
    randomize(m, 3);
    const auto x = random_ids(B * T, 50, 1), y = random_ids(B * T, 50, 2);
    m.zero_grad();
    m.forward(x.data(), y.data(), B, T, /*train=*/true);
    m.backward();
    std::vector<float> grads(static_cast<const float*>(m.grads().data()),
                             static_cast<const float*>(m.grads().data()) + m.grads().nbytes() / sizeof(float));
    std::mt19937 g(9);
    int checked = 0;
    for (size_t i = 0; i < m.param_specs().size(); ++i) {
        const ParamSpec& s = m.param_specs()[i];
        Tensor t = m.params().view(i);
        const int64_t live = s.live_rows() * (t.numel() / s.shape[0]);
        for (int k = 0; k < 4; ++k) {
            const int64_t j = static_cast<int64_t>(g() % static_cast<uint32_t>(live));
            float* w = t.ptr<float>() + j;
            const float w0 = *w, h = 1e-2f;
            *w = w0 + h;
            const double up = m.forward(x.data(), y.data(), B, T, false);
            *w = w0 - h;
            const double down = m.forward(x.data(), y.data(), B, T, false);
            *w = w0;
            const double fd = (up - down) / (2.0 * h);
            const double an = grads[m.params().entry(i).offset / sizeof(float) + static_cast<size_t>(j)];
            EXPECT_LE(std::abs(fd - an), 2e-3 + 3e-2 * std::abs(an))
                << s.name << "[" << j << "] fd " << fd << " analytic " << an;
            ++checked;
        }
    }
    EXPECT_GT(checked, 30);
}

INSTANTIATE_TEST_SUITE_P(Families, LlamaGradients,
                         ::testing::Combine(::testing::Values(true, false), ::testing::Range(0, kNumFamilies)),
                         [](const ::testing::TestParamInfo<std::tuple<bool, int>>& p) {
                             return std::string(kFamilies[std::get<1>(p.param)].name) +
                                    (std::get<0>(p.param) ? "_tied" : "_untied");
                         });

struct Trace {
    std::vector<float> losses, grads, params;
};

// Three SGD steps (lr 0.05 on the raw gradient) so later steps see other weights.
Trace sgd(Recompute r, int family) {
    const int B = 2, T = 16;
    Llama m(tiny(false, r, family));
    randomize(m, 5);
    float* p = static_cast<float*>(m.params().data());
    const float* g = static_cast<const float*>(m.grads().data());
    const size_t n = m.params().nbytes() / sizeof(float);
    Trace tr;
    for (int s = 0; s < 3; ++s) {
        const auto x = random_ids(B * T, 50, 10 + s), y = random_ids(B * T, 50, 20 + s);
        m.zero_grad();
        tr.losses.push_back(m.forward(x.data(), y.data(), B, T, true));
        m.backward();
        for (size_t i = 0; i < n; ++i) p[i] -= 0.05f * g[i];
    }
    tr.grads.assign(g, g + n);
    tr.params.assign(p, p + n);
    return tr;
}

// Recomputation runs the same kernels on the same inputs in the same order: any difference at all means a
// buffer was read before it was recomputed or from the wrong layer, so the tolerance is zero.
TEST(LlamaRecompute, MlpAndAllMatchNoneBitwise) {
    for (int family = 0; family < kNumFamilies; ++family) {
        const Trace none = sgd(Recompute::kNone, family);
        for (Recompute r : {Recompute::kMlp, Recompute::kAll}) {
            SCOPED_TRACE(std::string(kFamilies[family].name) + (r == Recompute::kMlp ? " mlp" : " all"));
            const Trace t = sgd(r, family);
            EXPECT_EQ(t.losses, none.losses);
            EXPECT_EQ(0, std::memcmp(t.grads.data(), none.grads.data(), t.grads.size() * sizeof(float)));
            EXPECT_EQ(0, std::memcmp(t.params.data(), none.params.data(), t.params.size() * sizeof(float)));
        }
    }
    const LlamaConfig c = tiny(false);
    EXPECT_LT(Llama(tiny(false, Recompute::kAll)).memory_plan(2, 16).activations,
              Llama(tiny(false, Recompute::kMlp)).memory_plan(2, 16).activations);
    EXPECT_LT(Llama(tiny(false, Recompute::kMlp)).memory_plan(2, 16).activations,
              Llama(c).memory_plan(2, 16).activations);
}

// max |a - b| / max |b| over n values.
double rel_err(const float* a, const float* b, int n) {
    return support::rel_err(std::span<const float>(a, static_cast<size_t>(n)),
                            std::span<const float>(b, static_cast<size_t>(n)));
}

// Same fp32 ops on the same values, only summation orders differ (one row vs T rows through the GEMM, the
// cached attention's loop): ~1e-6 relative over two layers; a wrong position, cache row, RoPE offset or
// kv head is off by O(1).
TEST(LlamaDecoder, EveryPositionMatchesTheFullForward) {
    for (int family = 0; family < kNumFamilies; ++family)
    for (bool tied : {true, false}) {
        SCOPED_TRACE(std::string(kFamilies[family].name) + (tied ? " tied" : " untied"));
        Llama m(tiny(tied, Recompute::kNone, family));
        randomize(m, 11);
        const int T = 16, V = 50, Vp = 64;
        const auto ids = random_ids(T, V, 5);
        m.forward(ids.data(), nullptr, 1, T, false);
        const std::vector<float> full(m.logits(), m.logits() + static_cast<size_t>(T) * Vp);
        auto [lo, hi] = std::minmax_element(full.begin(), full.begin() + V);
        ASSERT_GT(*hi - *lo, 1.0f);  // logits that vary: a meaningful comparison
        auto dec = m.decoder();
        for (int p : {1, 5, T}) {
            const float* lg = dec->prefill(std::span<const int32_t>(ids.data(), static_cast<size_t>(p)));
            EXPECT_LT(rel_err(lg, &full[static_cast<size_t>(p - 1) * Vp], V), 1e-5) << "prompt " << p;
            for (int t = p; t < T; ++t) {
                lg = dec->step(ids[static_cast<size_t>(t)]);
                EXPECT_LT(rel_err(lg, &full[static_cast<size_t>(t) * Vp], V), 1e-5) << "prompt " << p << " pos " << t;
            }
            EXPECT_THROW(dec->step(0), InputError);  // context full
        }
    }
}

// Our HF tensors written as safetensors and read back into another model: every parameter bit-identical,
// padding rows zero, and the file has HF's names and shapes (q/k/v and gate/up split).
TEST(LlamaHf, WrittenTensorsReadBackBitIdentical) {
    const auto dir = std::filesystem::temp_directory_path() / ("llmt_llama_hf_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    Llama a(tiny(false));
    randomize(a, 17);
    std::vector<std::vector<float>> scratch;
    write_safetensors(dir / "model.safetensors", hf_tensors(a, a.params(), scratch), {{"format", "pt"}});
    const SafetensorsFile f = SafetensorsFile::open(dir / "model.safetensors");
    EXPECT_EQ(f.info("model.layers.1.self_attn.k_proj.weight").shape, (Shape{16, 32}));  // 2 kv heads x 8
    EXPECT_EQ(f.info("model.layers.0.mlp.up_proj.weight").shape, (Shape{48, 32}));
    EXPECT_EQ(f.info("lm_head.weight").shape, (Shape{50, 32}));  // no padding rows
    EXPECT_FALSE(f.contains("model.layers.0.self_attn.qkv_proj.weight"));
    Llama b(tiny(false));
    load_hf(b, b.params(), SafetensorsSource(f));
    ASSERT_EQ(a.params().nbytes(), b.params().nbytes());
    EXPECT_EQ(0, std::memcmp(a.params().data(), b.params().data(), a.params().nbytes()));
    std::filesystem::remove_all(dir);
}

// Qwen2's q/k/v bias is one fused tensor here and HF's three: split on writing, joined on reading.
TEST(LlamaHf, Qwen2BiasesAreHfsThreeTensors) {
    const auto path =
        std::filesystem::temp_directory_path() / ("llmt_qwen2_hf_" + std::to_string(::getpid()) + ".safetensors");
    Llama a(tiny(true, Recompute::kNone, family_of("qwen2")));
    randomize(a, 19);
    std::vector<std::vector<float>> scratch;
    write_safetensors(path, hf_tensors(a, a.params(), scratch), {{"format", "pt"}});
    const SafetensorsFile f = SafetensorsFile::open(path);
    EXPECT_EQ(f.info("model.layers.0.self_attn.q_proj.bias").shape, (Shape{32}));
    EXPECT_EQ(f.info("model.layers.1.self_attn.k_proj.bias").shape, (Shape{16}));
    EXPECT_EQ(f.info("model.layers.1.self_attn.v_proj.bias").shape, (Shape{16}));
    EXPECT_FALSE(f.contains("model.layers.0.self_attn.o_proj.bias"));
    Llama b(tiny(true, Recompute::kNone, family_of("qwen2")));
    load_hf(b, b.params(), SafetensorsSource(f));
    EXPECT_EQ(0, std::memcmp(a.params().data(), b.params().data(), a.params().nbytes()));
    // A llama reading the same file finds tensors it does not have.
    Llama c(tiny(true));
    EXPECT_THROW(load_hf(c, c.params(), SafetensorsSource(f)), CheckpointError);
    std::filesystem::remove(path);
}

TEST(LlamaHf, MissingOrMisShapedTensorsAreNamed) {
    Llama a(tiny(true));
    randomize(a, 1);
    std::vector<std::vector<float>> scratch;
    auto refs = hf_tensors(a, a.params(), scratch);
    // Drop v_proj of layer 1 and give k_proj of layer 0 the shape of an MHA model (4 kv heads).
    std::vector<float> wide(64 * 32, 0.f);
    std::vector<TensorRef> bad;
    for (auto r : refs) {
        if (r.name == "model.layers.1.self_attn.v_proj.weight") continue;
        if (r.name == "model.layers.0.self_attn.k_proj.weight") r = {r.name, StDType::kF32, {32, 32}, wide.data()};
        bad.push_back(r);
    }
    const auto path =
        std::filesystem::temp_directory_path() / ("llmt_llama_bad_" + std::to_string(::getpid()) + ".safetensors");
    write_safetensors(path, bad);
    Llama b(tiny(true));
    try {
        load_hf(b, b.params(), SafetensorsSource(SafetensorsFile::open(path)));
        FAIL() << "expected CheckpointError";
    } catch (const CheckpointError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("missing tensor `model.layers.1.self_attn.v_proj.weight` (expected shape [16, 32])"),
                  std::string::npos)
            << m;
        EXPECT_NE(m.find("`model.layers.0.self_attn.k_proj.weight`: expected shape [16, 32], found [32, 32]"),
                  std::string::npos)
            << m;
    }
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace llmt::models

namespace llmt::models {
namespace {

// With a window of W and 2 layers, position t reads tokens t - 2(W - 1) .. t only: a token further back
// changes nothing, bit for bit (masked keys contribute exact zeros), and one inside the reach does.
TEST(MistralWindow, ATokenBeyondTheReachOfTheWindowChangesNothing) {
    Llama m(tiny(false, Recompute::kNone, family_of("mistral")));
    randomize(m, 7);
    const int T = 16, V = 50, Vp = 64, reach = 2 * (5 - 1);
    auto ids = random_ids(T, V, 8);
    m.forward(ids.data(), nullptr, 1, T, false);
    const std::vector<float> a(m.logits(), m.logits() + static_cast<size_t>(T) * Vp);
    ids[2] = (ids[2] + 1) % V;
    m.forward(ids.data(), nullptr, 1, T, false);
    const std::vector<float> b(m.logits(), m.logits() + static_cast<size_t>(T) * Vp);
    for (int t = 0; t < T; ++t) {
        const bool same = std::equal(a.begin() + t * Vp, a.begin() + (t + 1) * Vp, b.begin() + t * Vp);
        EXPECT_EQ(same, t < 2 || t > 2 + reach) << "position " << t;
    }
}

// A sequence longer than the context is refused by name before any activation is sized for it.
TEST(LlamaForward, SequenceLongerThanTheContextIsRefused) {
    Llama m(tiny(true));
    const auto ids = random_ids(17, 50, 1);  // block_size 16
    try {
        m.forward(ids.data(), ids.data(), 1, 17, false);
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("llama forward: sequence length 17 exceeds model.block_size 16"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace llmt::models

namespace llmt::models {
namespace {

// Packed examples: a row holding examples [0, 5) and [5, 12) with positions restarting at 5.
// With targets on the second example only, its loss and every gradient equal those of the second example
// alone in a row (fp32: the packed row's GEMMs sum over more rows, zeros from the first example's masked
// targets included, in another blocking: ~1e-6 relative); and the first example's tokens do not matter at
// all: changing them leaves the loss and gradients bit for bit the same (attention does not cross examples
// and masked targets contribute exact zeros).
class LlamaPacking : public ::testing::TestWithParam<int> {};

TEST_P(LlamaPacking, AnExampleInAPackedRowIsTheExampleAlone) {
    const int T = 12, first = 5;
    auto run = [&](const std::vector<int32_t>& x, const std::vector<int32_t>& y, const std::vector<int32_t>& pos,
                   int len, std::vector<float>& grads) {
        Llama m(tiny(false, Recompute::kNone, GetParam()));
        randomize(m, 5);
        m.zero_grad();
        const float loss = m.forward(x.data(), y.data(), 1, len, true, 1.f, pos.data());
        m.backward();
        const float* g = static_cast<const float*>(m.grads().data());
        grads.assign(g, g + m.grads().nbytes() / sizeof(float));
        return loss;
    };
    const auto ids = random_ids(T + 1, 50, 3), other = random_ids(first, 50, 4);
    std::vector<int32_t> x(ids.begin(), ids.begin() + T), y(ids.begin() + 1, ids.end()), pos(T);
    for (int t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = t < first ? t : t - first;
    for (int t = 0; t < first; ++t) y[static_cast<size_t>(t)] = -1;
    std::vector<float> g_packed, g_other, g_alone;
    const float packed = run(x, y, pos, T, g_packed);
    std::vector<int32_t> x2 = x;
    std::copy(other.begin(), other.end(), x2.begin());
    const float changed = run(x2, y, pos, T, g_other);
    EXPECT_EQ(packed, changed);
    EXPECT_EQ(g_packed, g_other) << "the first example's tokens reached the second's loss";

    const int len = T - first;
    std::vector<int32_t> xa(x.begin() + first, x.end()), ya(y.begin() + first, y.end()), pa(static_cast<size_t>(len));
    for (int t = 0; t < len; ++t) pa[static_cast<size_t>(t)] = t;
    const float alone = run(xa, ya, pa, len, g_alone);
    EXPECT_NEAR(packed, alone, 1e-6 * std::abs(alone));
    double num = 0, den = 1e-30;
    for (size_t i = 0; i < g_alone.size(); ++i) {
        num += (g_packed[i] - g_alone[i]) * static_cast<double>(g_packed[i] - g_alone[i]);
        den += static_cast<double>(g_alone[i]) * g_alone[i];
    }
    EXPECT_LT(std::sqrt(num / den), 1e-5);
    // Without positions the same row lets the second example see the first: the loss differs.
    std::vector<int32_t> plain(static_cast<size_t>(T));
    for (int t = 0; t < T; ++t) plain[static_cast<size_t>(t)] = t;
    std::vector<float> g_plain;
    EXPECT_NE(run(x, y, plain, T, g_plain), packed);
}

INSTANTIATE_TEST_SUITE_P(Families, LlamaPacking, ::testing::Range(0, kNumFamilies),
                         [](const ::testing::TestParamInfo<int>& p) { return kFamilies[p.param].name; });

TEST(LlamaPacking, PositionsThatDoNotRestartAtZeroAreRefused) {
    Llama m(tiny(false));
    randomize(m, 5);
    const auto x = random_ids(8, 50, 1), y = random_ids(8, 50, 2);
    std::vector<int32_t> pos = {0, 1, 2, 0, 1, 3, 4, 5};
    try {
        m.forward(x.data(), y.data(), 1, 8, false, 1.f, pos.data());
        FAIL() << "expected an InputError";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("position id 3 at row 0, slot 5"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace llmt::models
