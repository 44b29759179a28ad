// The KV-cache decoder (models/kv_decoder.h) on GPT-2 against the full forward: the logits at every position agree,
// for prompts of several lengths, tied and untied heads; the context limit and bad ids are InputErrors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "models/gpt2.h"
#include "models/kv_decoder.h"
#include "small_configs.h"
#include "support/error_measures.h"

namespace {

using llmt::CounterRng;
using llmt::InputError;
using llmt::InternalError;
using llmt::models::Gpt2;
using llmt::models::Gpt2Config;
using llmt::models::KvDecoder;

Gpt2Config tiny(bool tie) {
    Gpt2Config c = llmt::models::test::small_gpt2(24);
    c.tie_embeddings = tie;
    return c;
}

// GPT-2's init (std 0.02) makes attention nearly uniform and logits nearly equal, which would hide a
// wrong cache row or position; adding N(0, 0.3) to every parameter gives peaked attention and logits
// spread over several units.
void randomize(Gpt2& m, uint64_t seed) {
    m.init_random(seed);
    for (size_t i = 0; i < m.params().size(); ++i) {
        llmt::Tensor t = m.params().view(i);
        float* p = t.ptr<float>();
        CounterRng rng(seed + 1, i);
        for (int64_t k = 0; k < t.numel(); ++k) p[k] += static_cast<float>(0.3 * rng.normal(static_cast<uint64_t>(k)));
    }
}

std::vector<int32_t> random_ids(int n, int V, uint64_t seed) {
    CounterRng rng(seed, 99);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
        ids[static_cast<size_t>(i)] = static_cast<int32_t>(rng.bits(static_cast<uint64_t>(i)) % V);
    return ids;
}

// max |a - b| / max |b| over the V real columns.
double rel_err(const float* a, const float* b, int V) {
    return llmt::support::rel_err(std::span<const float>(a, static_cast<size_t>(V)),
                                  std::span<const float>(b, static_cast<size_t>(V)));
}

// Same fp32 ops on the same values; only summation orders differ (a GEMM over 1 row vs T rows may take
// a different kernel path, the cached attention loops where the full one uses blocked GEMM tiles).
// With K <= 128 terms per dot product and 2 layers that is ~1e-6 relative; 1e-5 leaves headroom while
// a wrong position, cache row or mask is off by O(1).
constexpr double kTol = 1e-5;

class DecodeMatchesForward : public ::testing::TestWithParam<bool> {};

TEST_P(DecodeMatchesForward, EveryPositionForSeveralPromptLengths) {
    const Gpt2Config cfg = tiny(GetParam());
    Gpt2 model(cfg);
    randomize(model, 11);
    const int T = cfg.block_size, V = cfg.vocab_size, Vp = cfg.padded_vocab;
    auto ids = random_ids(T, V, 5);
    model.forward(ids.data(), nullptr, 1, T, false);
    std::vector<float> full(model.logits(), model.logits() + static_cast<size_t>(T) * Vp);
    // The logits really vary (else the comparison would be weak): spread of a row > 1.
    auto [lo, hi] = std::minmax_element(full.begin(), full.begin() + V);
    ASSERT_GT(*hi - *lo, 1.0f);

    KvDecoder dec(model);
    for (int p : {1, 2, 7, 16, T}) {
        const float* lg = dec.prefill(std::span<const int32_t>(ids.data(), static_cast<size_t>(p)));
        EXPECT_LT(rel_err(lg, &full[static_cast<size_t>(p - 1) * Vp], V), kTol) << "prompt " << p;
        for (int t = p; t < T; ++t) {
            lg = dec.step(ids[static_cast<size_t>(t)]);
            ASSERT_EQ(dec.position(), t + 1);
            EXPECT_LT(rel_err(lg, &full[static_cast<size_t>(t) * Vp], V), kTol) << "prompt " << p << " position " << t;
        }
        EXPECT_THROW(dec.step(0), InputError);  // context full
    }
}

INSTANTIATE_TEST_SUITE_P(Models, DecodeMatchesForward, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "tied" : "untied"; });

TEST(Gpt2KvDecoder, ContextLimitNamesBlockSize) {
    Gpt2 model(tiny(true));
    randomize(model, 3);
    KvDecoder dec(model, 4);
    std::vector<int32_t> ids = {1, 2, 3};
    dec.prefill(ids);
    dec.step(4);
    try {
        dec.step(5);
        FAIL() << "step past the cache did not throw";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("block_size"), std::string::npos) << e.what();
    }
    std::vector<int32_t> five = {1, 2, 3, 4, 5};
    EXPECT_THROW(dec.prefill(five), InputError);
    EXPECT_THROW(KvDecoder(model, 25), InternalError);  // above block_size 24
}

TEST(Gpt2KvDecoder, RejectsBadIdsAndStepBeforePrefill) {
    Gpt2 model(tiny(true));
    randomize(model, 4);
    KvDecoder dec(model);
    EXPECT_THROW(dec.step(1), InternalError);
    std::vector<int32_t> pad = {1, 55};  // 55 is a padding column (V = 50, Vp = 64)
    EXPECT_THROW(dec.prefill(pad), InputError);
    std::vector<int32_t> neg = {-1};
    EXPECT_THROW(dec.prefill(neg), InputError);
    std::vector<int32_t> none;
    EXPECT_THROW(dec.prefill(none), InputError);
}

TEST(Gpt2KvDecoder, PrefillRestartsTheSequence) {
    // A second prefill forgets the first sequence: same logits as a fresh decoder.
    Gpt2 model(tiny(true));
    randomize(model, 8);
    auto a = random_ids(10, 50, 1), b = random_ids(6, 50, 2);
    KvDecoder d1(model), d2(model);
    d1.prefill(a);
    for (int i = 0; i < 3; ++i) d1.step(a[static_cast<size_t>(i)]);
    const float* x = d1.prefill(b);
    const float* y = d2.prefill(b);
    for (int i = 0; i < 50; ++i) ASSERT_EQ(x[i], y[i]);
}

}  // namespace
