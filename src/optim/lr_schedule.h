// Learning-rate schedules: linear warmup, then cosine / linear decay to min_lr, or constant.
// Warmup follows llm.c and nanoGPT: lr * (step + 1) / warmup_steps for step < warmup_steps, so step 0
// already trains (lr/warmup) and step warmup_steps - 1 reaches the full lr. Steps are 0-based.
#pragma once

#include <cstdint>
#include <string_view>

namespace llmt::optim {

enum class ScheduleKind { kCosine, kLinear, kConstant };

// "cosine" | "linear" | "constant"; throws InputError naming the accepted values otherwise.
ScheduleKind parse_schedule_kind(std::string_view name);
std::string_view schedule_kind_name(ScheduleKind k);

struct LrSchedule {
    ScheduleKind kind = ScheduleKind::kCosine;
    double lr = 6e-4;          // peak learning rate, reached at the end of warmup
    double min_lr = 0.0;       // value at step >= max_steps for cosine / linear
    std::int64_t warmup_steps = 0;
    std::int64_t max_steps = 1;  // total optimizer steps of the run

    // The learning rate for 0-based optimizer step `step`:
    //   step < warmup:                  lr * (step + 1) / warmup
    //   constant:                       lr
    //   r = (step - warmup) / (max_steps - warmup), clamped to [0, 1] (r = 1 when max_steps <= warmup)
    //   cosine:                         min_lr + 0.5 * (1 + cos(pi * r)) * (lr - min_lr)
    //   linear:                         min_lr + (1 - r) * (lr - min_lr)
    // Pure function of its inputs, so a resumed run gets the same values.
    double at(std::int64_t step) const;

    // Throws InternalError for negative steps/rates, min_lr > lr, or max_steps < 1: the config loader refuses
    // those values first, so reaching them here is a bug.
    void validate() const;
};

}  // namespace llmt::optim
