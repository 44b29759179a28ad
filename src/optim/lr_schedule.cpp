// Learning-rate schedules (lr_schedule.h); formulas as llm.c train_gpt2.cu `get_learning_rate`.
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/check.h"

namespace llmt::optim {

ScheduleKind parse_schedule_kind(std::string_view name) {
    if (name == "cosine") return ScheduleKind::kCosine;
    if (name == "linear") return ScheduleKind::kLinear;
    if (name == "constant") return ScheduleKind::kConstant;
    throw InputError(fmt::format("unknown lr schedule '{}' (expected one of cosine, linear, constant)", name));
}

std::string_view schedule_kind_name(ScheduleKind k) {
    switch (k) {
        case ScheduleKind::kCosine: return "cosine";
        case ScheduleKind::kLinear: return "linear";
        case ScheduleKind::kConstant: return "constant";
    }
    return "?";
}

void LrSchedule::validate() const {
    LLMT_INTERNAL_CHECK(lr >= 0 && std::isfinite(lr), "lr schedule: lr must be a finite value >= 0, got {}", lr);
    LLMT_INTERNAL_CHECK(min_lr >= 0 && min_lr <= lr, "lr schedule: min_lr must be in [0, lr={}], got {}", lr, min_lr);
    LLMT_INTERNAL_CHECK(warmup_steps >= 0, "lr schedule: warmup_steps must be >= 0, got {}", warmup_steps);
    LLMT_INTERNAL_CHECK(max_steps >= 1, "lr schedule: max_steps must be >= 1, got {}", max_steps);
}

double LrSchedule::at(std::int64_t step) const {
    if (step < warmup_steps) {
        return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
    }
    if (kind == ScheduleKind::kConstant) return lr;
    double r = 1.0;
    if (max_steps > warmup_steps) {
        r = static_cast<double>(step - warmup_steps) / static_cast<double>(max_steps - warmup_steps);
        r = std::clamp(r, 0.0, 1.0);
    }
    double coeff = kind == ScheduleKind::kCosine ? 0.5 * (1.0 + std::cos(std::numbers::pi * r)) : 1.0 - r;
    return min_lr + coeff * (lr - min_lr);
}

}  // namespace llmt::optim
