// The optimizer and learning-rate schedule a run's trainer section asks for (trainer.optimizer adamw | sgd,
// trainer.schedule), built from the typed config (config/config.h) so the trainer never names one.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "config/config.h"
#include "core/tensor.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "optim/param_slots.h"

namespace llmt::optim {

// trainer.optimizer over `slots` of an arena of `arena_numel` floats, owning the state of `slice` (the whole
// arena, or a ZeRO-1 shard), on `device`. Throws InputError as the optimizers' constructors do.
std::unique_ptr<Optimizer> make_optimizer(const config::TrainerConfig& tc, std::vector<ParamSlot> slots,
                                          std::size_t arena_numel, ArenaSlice slice, Device device);

// trainer.schedule, lr, min_lr, warmup_steps and max_steps, validated (LrSchedule::validate's errors).
LrSchedule make_lr_schedule(const config::TrainerConfig& tc);

}  // namespace llmt::optim
