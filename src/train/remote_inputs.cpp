#include "train/remote_inputs.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "config/config.h"
#include "storage/object_cache.h"
#include "storage/s3_client.h"

namespace llmt::train {

void fetch_remote_inputs(config::Config& cfg) {
    std::unique_ptr<storage::S3Client> client;  // made on the first s3:// value
    const std::filesystem::path cache = std::filesystem::path(cfg.output.root_dir) / ".cache" / "s3";
    const auto part_bytes =
        std::max<std::uint64_t>(1, static_cast<std::uint64_t>(cfg.output.sync_part_mb * 1048576.0));
    auto store = [&]() -> storage::S3Client& {
        if (!client) client = std::make_unique<storage::S3Client>(storage::s3_settings_from_environment());
        return *client;
    };
    if (storage::is_s3_uri(cfg.model.init_from)) {
        const auto uri = storage::parse_s3_uri(cfg.model.init_from, "model.init_from");
        cfg.model.init_from = storage::fetch_cached(store(), uri, cache, part_bytes, "model.init_from").string();
        // Also in the resolved config: a model directory's config.json re-reads the model section from it.
        cfg.resolved["model"]["init_from"] = cfg.model.init_from;
    }
    for (auto [key, value] : {std::pair<const char*, std::string*>{"data.train_shards", &cfg.data.train_shards},
                              {"data.val_shards", &cfg.data.val_shards}}) {
        if (!storage::is_s3_uri(*value)) continue;
        *value = storage::fetch_cached_glob(store(), storage::parse_s3_uri(*value, key), cache, part_bytes, key);
    }
}

}  // namespace llmt::train
