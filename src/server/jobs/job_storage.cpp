#include "server/jobs/job_storage.h"

#include <fmt/format.h>

#include "config/loader.h"

namespace llmt::server {

nlohmann::json job_storage(const std::string& config_yaml, std::int64_t job_id) {
    nlohmann::json out = nlohmann::json::object();
    config::Config cfg;
    try {
        cfg = config::load_config_string(config_yaml, fmt::format("job {} config", job_id));
    } catch (const std::exception&) {
        return out;
    }
    auto s3 = [](const std::string& v) { return v.rfind("s3://", 0) == 0; };
    if (s3(cfg.data.train_shards)) out["dataset_uri"] = cfg.data.train_shards;
    if (s3(cfg.data.val_shards)) out["val_dataset_uri"] = cfg.data.val_shards;
    if (s3(cfg.model.init_from)) out["init_from_uri"] = cfg.model.init_from;
    if (s3(cfg.output.sync)) {
        std::string base = cfg.output.sync;
        while (!base.empty() && base.back() == '/') base.pop_back();
        out["sync_uri"] = fmt::format("{}/job-{}", base, job_id);
        out["checkpoints_uri"] = fmt::format("{}/job-{}/checkpoints/", base, job_id);
    }
    return out;
}

}  // namespace llmt::server
