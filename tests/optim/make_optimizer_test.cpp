// optim/make_optimizer.h: the trainer section's optimizer and schedule. Each config field reaches the
// optimizer it belongs to (one step equals the one of an optimizer built by hand with those values, bit for
// bit, and differs when a field changes), and the schedule is the LrSchedule of those fields, validated.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "config/config.h"
#include "core/error.h"
#include "optim/adamw.h"
#include "optim/make_optimizer.h"
#include "optim/sgd.h"

using namespace llmt;
using namespace llmt::optim;

namespace {

std::vector<ParamSlot> slots() { return {{"w", {2, 3}, 0, true}, {"b", {3}, 6, false}}; }
constexpr std::size_t kArena = 9;

// Parameters after two steps of `opt` from fixed weights and gradients (the second step reads the state).
std::vector<float> two_steps(Optimizer& opt) {
    std::vector<float> p(kArena), g(kArena);
    for (std::size_t i = 0; i < kArena; ++i) {
        p[i] = 0.1f * static_cast<float>(i) - 0.3f;
        g[i] = 0.05f * static_cast<float>(kArena - i) - 0.2f;
    }
    opt.step(p.data(), g.data(), 0.01f);
    opt.step(p.data(), g.data(), 0.01f);
    return p;
}

config::TrainerConfig sgd_config() {
    config::TrainerConfig tc;
    tc.optimizer = "sgd";
    tc.momentum = 0.8;
    tc.dampening = 0.1;
    tc.nesterov = false;
    tc.weight_decay = 0.05;
    return tc;
}

config::TrainerConfig adamw_config() {
    config::TrainerConfig tc;
    tc.optimizer = "adamw";
    tc.betas = {0.8, 0.9};
    tc.eps = 1e-6;
    tc.weight_decay = 0.2;
    return tc;
}

TEST(MakeOptimizer, SgdTakesTheTrainersFields) {
    const config::TrainerConfig tc = sgd_config();
    auto made = make_optimizer(tc, slots(), kArena, {}, Device::kCpu);
    EXPECT_STREQ(made->name(), "sgd");
    Sgd by_hand(slots(), kArena, SgdConfig{0.8f, 0.1f, false, 0.05f});
    EXPECT_EQ(two_steps(*made), two_steps(by_hand));
    for (auto change : {+[](config::TrainerConfig& c) { c.momentum = 0.7; },
                        +[](config::TrainerConfig& c) { c.dampening = 0.0; },
                        +[](config::TrainerConfig& c) { c.weight_decay = 0.0; }}) {
        config::TrainerConfig other = tc;
        change(other);
        auto changed = make_optimizer(other, slots(), kArena, {}, Device::kCpu);
        Sgd again(slots(), kArena, SgdConfig{0.8f, 0.1f, false, 0.05f});
        EXPECT_NE(two_steps(*changed), two_steps(again));
    }
}

TEST(MakeOptimizer, AdamWTakesTheTrainersFields) {
    const config::TrainerConfig tc = adamw_config();
    auto made = make_optimizer(tc, slots(), kArena, {}, Device::kCpu);
    EXPECT_STREQ(made->name(), "adamw");
    AdamW by_hand(slots(), kArena, AdamWConfig{0.8f, 0.9f, 1e-6f, 0.2f});
    EXPECT_EQ(two_steps(*made), two_steps(by_hand));
    for (auto change : {+[](config::TrainerConfig& c) { c.betas[0] = 0.9; },
                        +[](config::TrainerConfig& c) { c.betas[1] = 0.95; },
                        +[](config::TrainerConfig& c) { c.eps = 1e-2; },
                        +[](config::TrainerConfig& c) { c.weight_decay = 0.0; }}) {
        config::TrainerConfig other = tc;
        change(other);
        auto changed = make_optimizer(other, slots(), kArena, {}, Device::kCpu);
        AdamW again(slots(), kArena, AdamWConfig{0.8f, 0.9f, 1e-6f, 0.2f});
        EXPECT_NE(two_steps(*changed), two_steps(again));
    }
}

TEST(MakeOptimizer, ASliceKeepsTheStateOfItsShardOnly) {
    auto made = make_optimizer(adamw_config(), slots(), kArena, ArenaSlice{0, 6}, Device::kCpu);
    for (const auto& t : made->state_tensors()) {
        std::int64_t n = 1;
        for (std::int64_t d : t.shape) n *= d;
        EXPECT_LE(n, 6) << t.name;
    }
}

TEST(MakeLrSchedule, IsTheScheduleOfTheTrainersFields) {
    config::TrainerConfig tc;
    tc.schedule = "linear";
    tc.lr = 1e-2;
    tc.min_lr = 1e-3;
    tc.warmup_steps = 2;
    tc.max_steps = 10;
    const LrSchedule s = make_lr_schedule(tc);
    const LrSchedule want{ScheduleKind::kLinear, 1e-2, 1e-3, 2, 10};
    for (int64_t step = 0; step <= 10; ++step) EXPECT_EQ(s.at(step), want.at(step)) << step;
    tc.min_lr = 1.0;  // above lr: the config loader refuses it first, so reaching validate() is a bug
    EXPECT_THROW(make_lr_schedule(tc), InternalError);
    tc.min_lr = 1e-3;
    tc.schedule = "step";
    EXPECT_THROW(make_lr_schedule(tc), InputError);
}

}  // namespace
