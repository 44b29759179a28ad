// Sampler (temperature, top-k, seeded) and the UTF-8 hold-back used when streaming tokens as text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "models/sampler.h"
#include "models/utf8_stream.h"

namespace {

using llmt::InputError;
using llmt::models::Sampler;
using llmt::models::SamplerOptions;

std::vector<float> random_logits(int n, uint64_t seed, double scale = 2.0) {
    llmt::CounterRng rng(seed, 1);
    std::vector<float> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
        v[static_cast<size_t>(i)] = static_cast<float>(scale * rng.normal(static_cast<uint64_t>(i)));
    return v;
}

int argmax(const std::vector<float>& v, int V) {
    int b = 0;
    for (int i = 1; i < V; ++i)
        if (v[static_cast<size_t>(i)] > v[static_cast<size_t>(b)]) b = i;
    return b;
}

TEST(Sampler, GreedyAndTopK1AreArgmax) {
    const int V = 300;
    Sampler greedy({0.f, 0, 1}, V), top1({1.5f, 1, 2}, V);
    for (uint64_t s = 0; s < 50; ++s) {
        auto lg = random_logits(V, s);
        EXPECT_EQ(greedy.sample(lg.data()), argmax(lg, V));
        EXPECT_EQ(top1.sample(lg.data()), argmax(lg, V));
    }
}

TEST(Sampler, NeverPicksPaddingColumns) {
    // Columns >= V hold huge values (as padding could after a bug): never chosen, in any mode.
    const int V = 10, Vp = 64;
    auto lg = random_logits(Vp, 3);
    for (int i = V; i < Vp; ++i) lg[static_cast<size_t>(i)] = 1e4f;
    for (SamplerOptions o : {SamplerOptions{0.f, 0, 1}, SamplerOptions{1.f, 0, 1}, SamplerOptions{5.f, 40, 1}}) {
        Sampler s(o, V);
        for (int i = 0; i < 200; ++i) EXPECT_LT(s.sample(lg.data()), V);
    }
}

TEST(Sampler, SameSeedSameTokensOtherSeedDiffers) {
    const int V = 1000;
    auto run = [&](uint64_t seed) {
        Sampler s({1.0f, 0, seed}, V);
        std::vector<int32_t> out;
        for (uint64_t t = 0; t < 64; ++t) out.push_back(s.sample(random_logits(V, t, 0.5).data()));
        return out;
    };
    EXPECT_EQ(run(1337), run(1337));
    // 64 draws over near-flat distributions of 1000 ids: equal sequences for two seeds would be a
    // collision of probability ~1e-190.
    EXPECT_NE(run(1337), run(1338));
}

// Top-p keeps the most likely ids until their probability reaches p (transformers' TopPLogitsWarper):
// with probabilities 0.5, 0.3, 0.15, 0.05 (logits = their logs, temperature 1), p = 0.75 keeps the first
// two (0.5 < 0.75, then 0.8 >= 0.75), p = 0.79 two, p = 0.81 three, p = 0.4 one (p = 0.8 itself is left
// out: float rounding decides there).
// Frequencies over 4000 draws: the kept ids renormalised (0.5/0.8 = 0.625 for id 0 with two kept; the
// 0.05 tolerance is ~6.5 standard deviations of a 4000-draw frequency, sqrt(0.625 * 0.375 / 4000)).
TEST(Sampler, TopPKeepsTheSmallestMostLikelySetReachingP) {
    const std::vector<float> lg = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
    auto seen = [&](float p, std::map<int32_t, int>* counts) {
        Sampler s({1.0f, 0, 7, p}, 4);
        std::set<int32_t> ids;
        for (int i = 0; i < 4000; ++i) {
            const int32_t id = s.sample(lg.data());
            ids.insert(id);
            if (counts) ++(*counts)[id];
        }
        return ids;
    };
    std::map<int32_t, int> counts;
    EXPECT_EQ(seen(0.75f, &counts), (std::set<int32_t>{1, 3}));
    EXPECT_NEAR(counts[1] / 4000.0, 0.625, 0.05);
    EXPECT_EQ(seen(0.79f, nullptr), (std::set<int32_t>{1, 3}));
    EXPECT_EQ(seen(0.81f, nullptr), (std::set<int32_t>{0, 1, 3}));
    EXPECT_EQ(seen(0.4f, nullptr), (std::set<int32_t>{1}));
    EXPECT_EQ(seen(1.0f, nullptr), (std::set<int32_t>{0, 1, 2, 3}));
    // After top-k: k = 3 drops id 2 first; p = 0.9 of the renormalised (0.5, 0.3, 0.15)/0.95 keeps all 3.
    Sampler both({1.0f, 3, 7, 0.9f}, 4);
    std::set<int32_t> ids;
    for (int i = 0; i < 2000; ++i) ids.insert(both.sample(lg.data()));
    EXPECT_EQ(ids, (std::set<int32_t>{0, 1, 3}));
    EXPECT_THROW(Sampler({1.0f, 0, 7, 0.f}, 4), llmt::InputError);
    EXPECT_THROW(Sampler({1.0f, 0, 7, 1.5f}, 4), llmt::InputError);
}

TEST(Sampler, TopKRestrictsToTheKLargest) {
    const int V = 200, k = 5;
    auto lg = random_logits(V, 9, 0.1);  // nearly flat: without the cut every id would appear
    std::vector<int> order(V);
    for (int i = 0; i < V; ++i) order[static_cast<size_t>(i)] = i;
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return lg[static_cast<size_t>(a)] > lg[static_cast<size_t>(b)]; });
    std::set<int32_t> allowed(order.begin(), order.begin() + k), seen;
    Sampler s({2.0f, k, 4}, V);
    for (int i = 0; i < 2000; ++i) seen.insert(s.sample(lg.data()));
    EXPECT_EQ(seen, allowed);  // only the top k, and (2000 draws of ~1/5 each) all of them
}

TEST(Sampler, TemperatureFollowsTheSoftmax) {
    // Two ids with logits 0 and ln 3 at T = 1: p = 1/4, 3/4. 20000 draws: sd of the frequency is
    // sqrt(.25 * .75 / 20000) = 0.003, so 0.015 is 5 sd.
    std::vector<float> lg = {0.f, std::log(3.f)};
    Sampler s({1.0f, 0, 5}, 2);
    int ones = 0;
    for (int i = 0; i < 20000; ++i) ones += s.sample(lg.data());
    EXPECT_NEAR(ones / 20000.0, 0.75, 0.015);
    // At T = 0.5 the ratio squares: p = 1/10, 9/10.
    Sampler c({0.5f, 0, 5}, 2);
    ones = 0;
    for (int i = 0; i < 20000; ++i) ones += c.sample(lg.data());
    EXPECT_NEAR(ones / 20000.0, 0.9, 0.015);
}

TEST(Sampler, RejectsBadOptionsAndNaN) {
    EXPECT_THROW(Sampler({-1.f, 0, 1}, 10), InputError);
    EXPECT_THROW(Sampler({NAN, 0, 1}, 10), InputError);
    EXPECT_THROW(Sampler({1.f, -2, 1}, 10), InputError);
    Sampler s({1.f, 0, 1}, 3);
    std::vector<float> lg = {0.f, NAN, 1.f};
    EXPECT_THROW(s.sample(lg.data()), InputError);
}

TEST(Utf8Stream, HoldsBackIncompleteCharacters) {
    using llmt::models::utf8_complete_prefix;
    EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
    EXPECT_EQ(utf8_complete_prefix(""), 0u);
    EXPECT_EQ(utf8_complete_prefix("a\xC3"), 1u);              // é's lead byte alone
    EXPECT_EQ(utf8_complete_prefix("a\xC3\xA9"), 3u);          // é complete
    EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98"), 0u);       // 3 of the 4 bytes of 😀
    EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98\x80"), 4u);
    EXPECT_EQ(utf8_complete_prefix("x\x80\x80"), 3u);          // stray continuation bytes pass through
    EXPECT_EQ(utf8_complete_prefix("x\xFF"), 2u);              // never valid: passes through

    // 😀 split over three "tokens" prints whole once complete; finish() flushes a dangling lead byte.
    llmt::models::Utf8Stream st;
    EXPECT_EQ(st.take("hi \xF0\x9F"), "hi ");
    EXPECT_EQ(st.take("\x98"), "");
    EXPECT_EQ(st.take("\x80!"), "\xF0\x9F\x98\x80!");
    EXPECT_EQ(st.take("\xE2\x82"), "");
    EXPECT_EQ(st.finish(), "\xE2\x82");
}

}  // namespace
