// train/task.h.
#include "train/task.h"

#include "config/config.h"
#include "train/image_task.h"
#include "train/lm_task.h"

namespace llmt::train {

std::unique_ptr<Task> make_task(const config::Config& cfg) {
    return cfg.model.is_classifier() ? make_image_task(cfg) : make_lm_task(cfg);
}

}  // namespace llmt::train
