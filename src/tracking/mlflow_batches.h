// Splits what a run logs into `runs/log-batch` requests within the REST API's limits
// (https://mlflow.org/docs/latest/rest-api.html#log-batch): at most 1000 metrics, 100 params and 100
// tags per request, and 1000 entities in all. The file store takes the same batches.
#pragma once

#include <vector>

#include "tracking/mlflow_store.h"

namespace llmt::tracking {

inline constexpr size_t kMaxBatchMetrics = 1000, kMaxBatchParams = 100, kMaxBatchTags = 100,
                        kMaxBatchEntities = 1000;

// The batches, in order: params and tags first (100 each), metrics filling the rest of each request.
std::vector<LogBatch> split_into_batches(const std::vector<Metric>& metrics, const std::vector<KeyValue>& params,
                                         const std::vector<KeyValue>& tags);

}  // namespace llmt::tracking
