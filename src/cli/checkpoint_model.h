// A checkpoint's model for the commands that read one (generate, export): its config (--config, else the
// resolved config the trainer stored in state.json) and the model built from it with the weights loaded.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "models/model.h"
#include "train/checkpoint.h"

namespace llmt::cli {

struct CheckpointModel {
    train::Checkpoint checkpoint;
    config::Config config;
    std::unique_ptr<models::Model> model;  // on the CPU, fp32
};

// `command` names the subcommand in messages. A wrong or empty --checkpoint is an InputError (exit 2).
CheckpointModel load_checkpoint_model(const std::string& command, const std::string& checkpoint,
                                      const std::string& config_path, const std::vector<std::string>& sets);

}  // namespace llmt::cli
