// optim/make_optimizer.h.
#include "optim/make_optimizer.h"

#include "optim/adamw.h"
#include "optim/sgd.h"

namespace llmt::optim {

std::unique_ptr<Optimizer> make_optimizer(const config::TrainerConfig& tc, std::vector<ParamSlot> slots,
                                          std::size_t arena_numel, ArenaSlice slice, Device device) {
    if (tc.optimizer == "sgd") {
        SgdConfig sc;
        sc.momentum = static_cast<float>(tc.momentum);
        sc.dampening = static_cast<float>(tc.dampening);
        sc.nesterov = tc.nesterov;
        sc.weight_decay = static_cast<float>(tc.weight_decay);
        return std::make_unique<Sgd>(std::move(slots), arena_numel, sc, slice, device);
    }
    AdamWConfig ac;
    ac.beta1 = static_cast<float>(tc.betas[0]);
    ac.beta2 = static_cast<float>(tc.betas[1]);
    ac.eps = static_cast<float>(tc.eps);
    ac.weight_decay = static_cast<float>(tc.weight_decay);
    return std::make_unique<AdamW>(std::move(slots), arena_numel, ac, slice, device);
}

LrSchedule make_lr_schedule(const config::TrainerConfig& tc) {
    LrSchedule s{parse_schedule_kind(tc.schedule), tc.lr, tc.min_lr, tc.warmup_steps, tc.max_steps};
    s.validate();
    return s;
}

}  // namespace llmt::optim
