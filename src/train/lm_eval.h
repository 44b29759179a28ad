// A language model's validation loss over eval batches, as `llmtrain train` logs it and `llmtrain eval`
// reports it (train/run_evaluation.cpp).
#pragma once

#include <cstdint>

#include "models/model.h"
#include "train/batches.h"

namespace llmt::train {

// Mean validation loss over `steps` eval batches, as `llmtrain eval` reports it: over windows the mean of
// the batches' means (every batch has B*T targets); over chat rows the mean over their targets
// (`weighted`: loss_sum and weight are the sums, for a mean across ranks).
struct EvalOutput {
    double loss = 0;
    int64_t tokens = 0;
    int64_t batches = 0;
    bool weighted = false;
    double loss_sum = 0, weight = 0;
};

EvalOutput evaluate(models::Model& model, const EvalBatches& batches, int B, int T, int64_t steps);

}  // namespace llmt::train
