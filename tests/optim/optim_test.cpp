// src/optim unit tests: AdamW vs a float64 transcription of the algorithm, decay grouping, ZeRO-1
// slices equal to the whole, state save/load through safetensors, mismatch reports; schedule closed
// forms at their boundaries; clipping coefficient rules. PyTorch comparisons: tests/reference.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/bf16.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "optim/lr_schedule.h"

namespace fs = std::filesystem;
using namespace llmt;
using namespace llmt::optim;

namespace {

// w (4x6, decay), b (6, no decay), 3 padding elements, ln (5, no decay), w2 (3x7, decay).
std::vector<ParamSlot> slots() {
    return {{"w", {4, 6}, 0, true}, {"b", {6}, 24, false}, {"ln", {5}, 33, false}, {"w2", {3, 7}, 38, true}};
}
constexpr std::size_t kArena = 59;

std::vector<float> randn(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

bool is_padding(std::size_t i) { return i >= 30 && i < 33; }

}  // namespace

TEST(AdamW, MatchesFloat64Transcription) {
    AdamWConfig cfg{0.9f, 0.95f, 1e-8f, 0.1f};
    AdamW opt(slots(), kArena, cfg);
    std::vector<float> p = randn(kArena, 1);
    std::vector<double> pd(p.begin(), p.end()), m(kArena, 0), v(kArena, 0);
    for (int t = 1; t <= 5; ++t) {
        std::vector<float> g = randn(kArena, 100 + t, t == 3 ? 1e-3f : 1.0f);
        const float lr = 1e-2f / t;
        opt.step(p.data(), g.data(), lr, 0.5f);
        for (std::size_t i = 0; i < kArena; ++i) {
            if (is_padding(i)) continue;
            const bool decay = i < 24 || i >= 38;
            double gi = 0.5 * g[i];
            pd[i] *= 1.0 - static_cast<double>(lr) * (decay ? 0.1 : 0.0);
            m[i] = 0.9 * m[i] + 0.1 * gi;
            v[i] = 0.95 * v[i] + 0.05 * gi * gi;
            double mhat = m[i] / (1 - std::pow(0.9, t)), vhat = v[i] / (1 - std::pow(0.95, t));
            pd[i] -= lr * mhat / (std::sqrt(vhat) + 1e-8);
        }
    }
    EXPECT_EQ(opt.step_count(), 5);
    for (std::size_t i = 0; i < kArena; ++i) {
        if (is_padding(i)) continue;
        // fp32 arithmetic vs double over 5 steps: parameters are O(1), each step rounds a few times at
        // 6e-8; 1e-6 absolute is well above that and far below an update (1e-3..1e-2).
        EXPECT_NEAR(p[i], pd[i], 1e-6) << "element " << i;
    }
}

TEST(AdamW, DecayOnlyOnDecayGroupAndPaddingUntouched) {
    AdamWConfig cfg;
    cfg.weight_decay = 0.5f;
    AdamW opt(slots(), kArena, cfg);
    std::vector<float> p(kArena, 2.0f), g(kArena, 0.0f);
    opt.step(p.data(), g.data(), 0.1f);
    for (std::size_t i = 0; i < kArena; ++i) {
        // Zero grads: m = v = 0, so only decoupled decay moves a parameter: 2 * (1 - 0.1 * 0.5).
        float want = (i < 24 || i >= 38) ? 2.0f * (1.0f - 0.05f) : 2.0f;
        EXPECT_EQ(p[i], want) << i;
    }
}

TEST(AdamW, Zero1SlicesEqualTheWholeBitForBit) {
    AdamWConfig cfg;
    AdamW whole(slots(), kArena, cfg);
    // Boundaries inside w, at a slot edge, inside the padding and inside w2.
    std::vector<AdamW> parts;
    std::size_t cuts[] = {0, 7, 24, 31, 45, kArena};
    for (int i = 0; i < 5; ++i) parts.emplace_back(slots(), kArena, cfg, ArenaSlice{cuts[i], cuts[i + 1]});
    std::vector<float> p1 = randn(kArena, 7), p2 = p1;
    for (int t = 0; t < 4; ++t) {
        std::vector<float> g = randn(kArena, 50 + t);
        whole.step(p1.data(), g.data(), 3e-3f);
        for (auto& o : parts) o.step(p2.data(), g.data(), 3e-3f);
    }
    EXPECT_EQ(std::memcmp(p1.data(), p2.data(), kArena * sizeof(float)), 0);
    // A slot cut by a boundary exports its part with a flat shape.
    auto specs = parts[0].state_specs();
    ASSERT_EQ(specs.size(), 3u);
    EXPECT_EQ(specs[0].name, "w.exp_avg");
    EXPECT_EQ(specs[0].shape, Shape{7});
    EXPECT_EQ(specs[2].name, "step");
    EXPECT_EQ(parts[3].state_metadata().at("slice_begin"), "31");
}

// Sharded masters: a slice's optimizer given the masters of its slice only (ParamsAt::kSlice) updates them as
// the whole arena's, and rewrites its slice of the bf16 compute copy (on the CPU too) and nothing else of it.
TEST(AdamW, SliceMastersAndComputeCopy) {
    AdamWConfig cfg;
    AdamW whole(slots(), kArena, cfg);
    const ArenaSlice mine{7, 45};
    AdamW part(slots(), kArena, cfg, mine);
    std::vector<float> p1 = randn(kArena, 7);
    std::vector<float> shard(p1.begin() + 7, p1.begin() + 45);
    std::vector<std::uint16_t> lp1(kArena, 0), lp2(kArena, 0x7fc0);  // lp2 outside the slice: a NaN marker
    for (int t = 0; t < 3; ++t) {
        std::vector<float> g = randn(kArena, 80 + t);
        whole.step(p1.data(), g.data(), 3e-3f, 0.5f, Tensor(lp1.data(), {static_cast<int64_t>(kArena)}, DType::kBF16));
        part.step(shard.data(), g.data(), 3e-3f, 0.5f,
                  Tensor(lp2.data(), {static_cast<int64_t>(kArena)}, DType::kBF16), Optimizer::ParamsAt::kSlice);
    }
    EXPECT_EQ(std::memcmp(shard.data(), p1.data() + 7, shard.size() * sizeof(float)), 0);
    for (std::size_t i = 0; i < kArena; ++i) {
        const bool padding = i >= 30 && i < 33;  // between b and ln: never touched
        if (i >= mine.begin && i < mine.end && !padding) {
            EXPECT_EQ(lp2[i], bf16_from_float(p1[i])) << "element " << i;
            EXPECT_EQ(lp1[i], bf16_from_float(p1[i])) << "element " << i;
        } else if (i < mine.begin || i >= mine.end) {
            EXPECT_EQ(lp2[i], 0x7fc0) << "element " << i << " outside the slice was written";
        }
    }
}

TEST(AdamW, StateRoundTripResumesBitForBit) {
    fs::path file = fs::temp_directory_path() / fmt::format("llmt_adamw_state_{}.safetensors", ::getpid());
    AdamWConfig cfg;
    AdamW a(slots(), kArena, cfg);
    std::vector<float> pa = randn(kArena, 3);
    for (int t = 0; t < 3; ++t) a.step(pa.data(), randn(kArena, 10 + t).data(), 1e-3f);
    write_safetensors(file, a.state_tensors(), a.state_metadata());

    AdamW b(slots(), kArena, cfg);
    auto f = SafetensorsFile::open(file);
    EXPECT_EQ(f.info("w.exp_avg").shape, (Shape{4, 6}));
    b.load_state(f);
    EXPECT_EQ(b.step_count(), 3);
    std::vector<float> pb = pa;
    for (int t = 3; t < 6; ++t) {
        auto g = randn(kArena, 10 + t);
        a.step(pa.data(), g.data(), 1e-3f);
        b.step(pb.data(), g.data(), 1e-3f);
    }
    EXPECT_EQ(std::memcmp(pa.data(), pb.data(), kArena * sizeof(float)), 0);
    fs::remove(file);
}

TEST(AdamW, LoadStateListsEveryDifferenceAndChangesNothing) {
    fs::path file = fs::temp_directory_path() / fmt::format("llmt_adamw_bad_{}.safetensors", ::getpid());
    AdamW a(slots(), kArena, AdamWConfig{});
    std::vector<float> p(kArena, 1.0f), g(kArena, 1.0f);
    a.step(p.data(), g.data(), 1e-3f);
    write_safetensors(file, a.state_tensors(), a.state_metadata());

    auto other = slots();
    other[0].shape = {6, 4};      // same numel, other shape
    other[2].name = "ln.weight";  // renamed
    AdamW b(other, kArena, AdamWConfig{});
    try {
        b.load_state(SafetensorsFile::open(file));
        FAIL() << "mismatch not detected";
    } catch (const CheckpointError& e) {
        std::string msg = e.what();
        for (const char* want : {"tensor 'w.exp_avg' has shape [4, 6], expected [6, 4]",
                                 "tensor 'w.exp_avg_sq' has shape [4, 6], expected [6, 4]",
                                 "missing tensor 'ln.weight.exp_avg' (expected F32 [5])",
                                 "missing tensor 'ln.weight.exp_avg_sq'", "unexpected tensor 'ln.exp_avg' (F32 [5])",
                                 "unexpected tensor 'ln.exp_avg_sq'", "6 differences"}) {
            EXPECT_NE(msg.find(want), std::string::npos) << "missing '" << want << "' in:\n" << msg;
        }
    }
    EXPECT_EQ(b.step_count(), 0);
    // A different slice of the same model is a difference too.
    AdamW c(slots(), kArena, AdamWConfig{}, ArenaSlice{0, 30});
    EXPECT_THROW(c.load_state(SafetensorsFile::open(file)), CheckpointError);
    fs::remove(file);
}

TEST(AdamW, RejectsBadSlots) {
    AdamWConfig cfg;
    EXPECT_THROW(AdamW({{"a", {4}, 0, true}, {"b", {4}, 3, true}}, 8, cfg), InternalError);  // overlap
    EXPECT_THROW(AdamW({{"a", {4}, 0, true}, {"a", {4}, 4, true}}, 8, cfg), InternalError);  // repeated name
    EXPECT_THROW(AdamW({{"a", {4, 3}, 0, true}}, 8, cfg), InternalError);                     // leaves the arena
    EXPECT_THROW(AdamW({{"step", {4}, 0, true}}, 8, cfg), InternalError);                     // reserved name
    EXPECT_THROW(AdamW({{"a", {4}, 0, true}}, 8, cfg, ArenaSlice{5, 5}), InternalError);       // empty slice
    EXPECT_THROW(AdamW({{"a", {4}, 0, true}}, 8, cfg, ArenaSlice{0, 9}), InternalError);       // outside
    AdamWConfig bad = cfg;
    bad.beta2 = 1.0f;
    EXPECT_THROW(AdamW({{"a", {4}, 0, true}}, 8, bad), InternalError);
}

TEST(LrSchedule, WarmupThenCosineClosedForm) {
    LrSchedule s{ScheduleKind::kCosine, 1.0, 0.1, 10, 110};
    EXPECT_DOUBLE_EQ(s.at(0), 0.1);   // lr * 1 / 10
    EXPECT_DOUBLE_EQ(s.at(4), 0.5);
    EXPECT_DOUBLE_EQ(s.at(9), 1.0);   // end of warmup: the full lr
    EXPECT_DOUBLE_EQ(s.at(10), 1.0);  // decay ratio 0: cos(0) = 1
    EXPECT_NEAR(s.at(60), 0.55, 1e-15);  // midpoint: (lr + min_lr) / 2
    EXPECT_NEAR(s.at(35), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-15);
    EXPECT_DOUBLE_EQ(s.at(110), 0.1);  // max_steps: min_lr
    EXPECT_DOUBLE_EQ(s.at(500), 0.1);  // beyond: clamped
    for (int i = 10; i < 110; ++i) EXPECT_GE(s.at(i), s.at(i + 1)) << i;  // monotone after warmup
}

TEST(LrSchedule, LinearConstantAndEdgeCases) {
    LrSchedule lin{ScheduleKind::kLinear, 2.0, 0.0, 0, 100};
    EXPECT_DOUBLE_EQ(lin.at(0), 2.0);  // no warmup: starts at lr
    EXPECT_DOUBLE_EQ(lin.at(25), 1.5);
    EXPECT_DOUBLE_EQ(lin.at(100), 0.0);
    LrSchedule c{ScheduleKind::kConstant, 3e-4, 0.0, 4, 10};
    EXPECT_DOUBLE_EQ(c.at(0), 0.75e-4);
    EXPECT_DOUBLE_EQ(c.at(3), 3e-4);
    EXPECT_DOUBLE_EQ(c.at(9), 3e-4);
    EXPECT_DOUBLE_EQ(c.at(1000), 3e-4);
    LrSchedule all_warm{ScheduleKind::kCosine, 1.0, 0.5, 20, 10};  // warmup longer than the run
    EXPECT_DOUBLE_EQ(all_warm.at(9), 0.5);  // still warming up: 10/20
    EXPECT_DOUBLE_EQ(all_warm.at(20), 0.5);  // past both: min_lr
    EXPECT_EQ(parse_schedule_kind("linear"), ScheduleKind::kLinear);
    EXPECT_THROW(parse_schedule_kind("cosin"), InputError);
    EXPECT_THROW((LrSchedule{ScheduleKind::kCosine, 1.0, 2.0, 0, 10}.validate()), InternalError);
    EXPECT_THROW((LrSchedule{ScheduleKind::kCosine, 1.0, 0.0, -1, 10}.validate()), InternalError);
    EXPECT_NO_THROW((LrSchedule{ScheduleKind::kCosine, 1.0, 0.0, 0, 1}.validate()));
}

TEST(GradClip, CoefficientFollowsTorchRules) {
    EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0f);  // below the threshold: untouched
    EXPECT_EQ(clip_coefficient(2.0, 1.0), static_cast<float>(1.0 / (2.0 + 1e-6)));
    // At exactly max_norm torch still scales, by 1 / (1 + 1e-6).
    EXPECT_EQ(clip_coefficient(1.0, 1.0), static_cast<float>(1.0 / (1.0 + 1e-6)));
    EXPECT_EQ(clip_coefficient(100.0, 0.0), 1.0f);  // disabled
    EXPECT_EQ(clip_coefficient(std::nan(""), 1.0), 1.0f);
    EXPECT_EQ(clip_coefficient(INFINITY, 1.0), 1.0f);
    std::vector<float> g = {3.0f, 4.0f, 0.0f};  // norm 5
    EXPECT_DOUBLE_EQ(clip_grad_norm(g.data(), g.size(), 1.0), 5.0);
    EXPECT_NEAR(std::hypot(g[0], g[1]), 1.0, 1e-6);
    std::vector<float> h = {3.0f, 4.0f};
    EXPECT_DOUBLE_EQ(clip_grad_norm(h.data(), h.size(), 10.0), 5.0);
    EXPECT_EQ(h[0], 3.0f);  // not clipped, not rescaled
    EXPECT_DOUBLE_EQ(grad_sum_squares(h.data(), 0), 0.0);
}
