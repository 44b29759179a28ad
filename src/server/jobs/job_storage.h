// Where a job's inputs and results live on object storage (docs/object_storage.md): the s3://
// values of its resolved config, for GET /v1/jobs/{id} ("storage").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace llmt::server {

// {"dataset_uri", "val_dataset_uri", "init_from_uri", "sync_uri", "checkpoints_uri"}, each present only
// when the config names one (sync_uri: output.sync/<run id>, the run id the scheduler gives the job).
// An empty object when none is, or when the config no longer loads (a job of an older version).
nlohmann::json job_storage(const std::string& config_yaml, std::int64_t job_id);

}  // namespace llmt::server
