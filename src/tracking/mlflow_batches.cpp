#include "tracking/mlflow_batches.h"

#include <algorithm>

namespace llmt::tracking {

std::vector<LogBatch> split_into_batches(const std::vector<Metric>& metrics, const std::vector<KeyValue>& params,
                                         const std::vector<KeyValue>& tags) {
    std::vector<LogBatch> out;
    size_t m = 0, p = 0, t = 0;
    while (m < metrics.size() || p < params.size() || t < tags.size()) {
        LogBatch b;
        const size_t np = std::min(kMaxBatchParams, params.size() - p);
        const size_t nt = std::min(kMaxBatchTags, tags.size() - t);
        const size_t nm = std::min({kMaxBatchMetrics, kMaxBatchEntities - np - nt, metrics.size() - m});
        b.params.assign(params.begin() + static_cast<long>(p), params.begin() + static_cast<long>(p + np));
        b.tags.assign(tags.begin() + static_cast<long>(t), tags.begin() + static_cast<long>(t + nt));
        b.metrics.assign(metrics.begin() + static_cast<long>(m), metrics.begin() + static_cast<long>(m + nm));
        p += np;
        t += nt;
        m += nm;
        out.push_back(std::move(b));
    }
    return out;
}

}  // namespace llmt::tracking
