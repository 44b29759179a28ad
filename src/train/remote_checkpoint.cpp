#include "train/remote_checkpoint.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>

#include "config/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "storage/s3_client.h"
#include "storage/transfer.h"
#include "train/checkpoint.h"

namespace llmt::train {

namespace fs = std::filesystem;

storage::S3Uri synced_run_uri(const std::string& sync, const std::string& run_id) {
    return storage::parse_s3_uri(sync, "output.sync").join(run_id);
}

std::vector<std::int64_t> synced_steps(storage::S3Client& client, const storage::S3Uri& run) {
    const storage::S3Uri dir = run.join("checkpoints/");
    std::vector<std::int64_t> steps;
    for (const auto& o : client.list_objects(dir)) {
        const std::string rel = o.key.substr(dir.key.size());  // "step_<N>/<file>"
        const auto slash = rel.find('/');
        if (slash == std::string::npos || rel.substr(slash + 1) != kSyncedMarker) continue;
        if (auto s = parse_step_dir_name(rel.substr(0, slash))) steps.push_back(*s);
    }
    std::sort(steps.begin(), steps.end());
    return steps;
}

fs::path fetch_synced_checkpoint(storage::S3Client& client, const storage::S3Uri& run, std::int64_t step,
                                 const fs::path& local_run, std::uint64_t part_bytes) {
    const storage::S3Uri remote = run.join("checkpoints/" + step_dir_name(step));
    fs::create_directories(local_run / "checkpoints");
    for (const auto& name : synced_run_files())
        if (client.head_object(run.join(name)))
            storage::download_file(client, run.join(name), local_run / name, part_bytes);
    const fs::path dest = local_run / "checkpoints" / step_dir_name(step);
    if (fs::is_directory(dest)) return dest;  // already here (a checkpoint this machine wrote or fetched)

    nlohmann::json marker;
    try {
        marker = nlohmann::json::parse(client.get_object(remote.join(kSyncedMarker)));
    } catch (const storage::StorageError& e) {
        if (e.status() != 404) throw;
        throw CheckpointError(
            fmt::format("{} has no {}: the checkpoint's upload did not complete", remote.str(), kSyncedMarker));
    } catch (const nlohmann::json::exception& e) {
        throw CheckpointError(fmt::format("{}: invalid JSON ({})", remote.join(kSyncedMarker).str(), e.what()));
    }
    const fs::path tmp = local_run / "checkpoints" / fmt::format(".fetch-{}-{}", step_dir_name(step), ::getpid());
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    for (const auto& f : marker.at("files")) {
        const std::string name = f.at("name");
        if (name.find('/') != std::string::npos || name.empty() || name[0] == '.')
            throw CheckpointError(
                fmt::format("{}: file name '{}' is not a plain name", remote.join(kSyncedMarker).str(), name));
        storage::download_file(client, remote.join(name), tmp / name, part_bytes);
        const std::uint64_t want = f.at("size"), got = fs::file_size(tmp / name);
        if (got != want)
            throw CheckpointError(
                fmt::format("{}: {} bytes downloaded, the marker says {}", remote.join(name).str(), got, want));
    }
    fs::rename(tmp, dest);
    return dest;
}

namespace {

std::uint64_t part_bytes_of(const config::Config& cfg) {
    return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(cfg.output.sync_part_mb * 1048576.0));
}

}  // namespace

fs::path fetch_for_resume(const std::string& spec, const config::Config& cfg) {
    storage::S3Uri run = storage::parse_s3_uri(spec, "--resume");
    while (!run.key.empty() && run.key.back() == '/') run.key.pop_back();
    std::optional<std::int64_t> step;
    const auto last_slash = run.key.rfind('/');
    if (last_slash != std::string::npos) {
        step = parse_step_dir_name(run.key.substr(last_slash + 1));
        if (step) {
            run.key = run.key.substr(0, last_slash);
            if (run.key.size() < 12 || run.key.compare(run.key.size() - 12, 12, "/checkpoints") != 0)
                throw InputError(fmt::format("--resume {}: a step_<N> must follow <run>/checkpoints/", spec));
            run.key.resize(run.key.size() - 12);
        }
    }
    const auto name_start = run.key.rfind('/');
    const std::string run_id = run.key.substr(name_start == std::string::npos ? 0 : name_start + 1);
    if (run_id.empty())
        throw InputError(
            fmt::format("--resume {}: expected s3://bucket/prefix/<run id>[/checkpoints/step_<N>]", spec));
    storage::S3Client client(storage::s3_settings_from_environment());
    if (!step) {
        const auto steps = synced_steps(client, run);
        if (steps.empty())
            throw InputError(fmt::format("--resume {}: no synced checkpoint under {} (a step counts once its {} is "
                                         "there)",
                                         spec, run.join("checkpoints/").str(), kSyncedMarker));
        step = steps.back();
    }
    return fetch_synced_checkpoint(client, run, *step, fs::path(cfg.output.root_dir) / run_id, part_bytes_of(cfg));
}

void fetch_newer_for_auto(const config::Config& cfg, const std::function<void(const std::string&)>& log) {
    if (cfg.output.sync.empty() || cfg.output.run_id.empty()) return;
    storage::S3Client client(storage::s3_settings_from_environment());
    const storage::S3Uri run = synced_run_uri(cfg.output.sync, cfg.output.run_id);
    const auto remote = synced_steps(client, run);
    const fs::path local_run = fs::path(cfg.output.root_dir) / cfg.output.run_id;
    const auto local = list_checkpoint_steps(local_run / "checkpoints");
    if (remote.empty() || (!local.empty() && local.back() >= remote.back())) return;
    const fs::path dir = fetch_synced_checkpoint(client, run, remote.back(), local_run, part_bytes_of(cfg));
    log(fmt::format("resume auto: fetched {} from {} (newer than any local checkpoint)", dir.string(), run.str()));
}

}  // namespace llmt::train
