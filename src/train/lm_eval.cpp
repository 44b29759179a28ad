// train/lm_eval.h.
#include "train/lm_eval.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace llmt::train {

EvalOutput evaluate(models::Model& model, const EvalBatches& batches, int B, int T, int64_t steps) {
    EvalOutput out;
    const int64_t n = std::min<int64_t>(steps, static_cast<int64_t>(batches.num_batches()));
    std::vector<int32_t> x(static_cast<size_t>(B) * T), y(x.size()), pos(x.size());
    for (int64_t b = 0; b < n; ++b) {
        const MicroBatch mb = batches.batch(static_cast<size_t>(b), x.data(), y.data(), pos.data());
        out.tokens += static_cast<int64_t>(B) * mb.T;
        out.weighted = mb.positions;
        if (mb.targets == 0) continue;  // a short last batch of chat rows: pad only
        const double loss = model.forward(x.data(), y.data(), B, mb.T, /*train=*/false, 1.f,
                                          mb.positions ? pos.data() : nullptr);
        out.loss_sum += mb.positions ? loss * static_cast<double>(mb.targets) : loss;
        out.weight += mb.positions ? static_cast<double>(mb.targets) : 1.0;
    }
    out.batches = n;
    out.loss = out.weight > 0 ? out.loss_sum / out.weight : std::nan("");
    return out;
}

}  // namespace llmt::train
