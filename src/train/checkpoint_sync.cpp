#include "train/checkpoint_sync.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>

#include "config/config.h"
#include "storage/s3_client.h"
#include "storage/transfer.h"
#include "train/checkpoint.h"
#include "train/remote_checkpoint.h"

namespace llmt::train {

namespace fs = std::filesystem;

std::unique_ptr<CheckpointSync> CheckpointSync::start(const config::Config& cfg, const fs::path& run_dir,
                                                      const std::string& run_id, Log log) {
    if (cfg.output.sync.empty()) return nullptr;
    auto client = std::make_unique<storage::S3Client>(storage::s3_settings_from_environment());
    const auto part_bytes = static_cast<std::uint64_t>(cfg.output.sync_part_mb * 1048576.0);
    return std::unique_ptr<CheckpointSync>(new CheckpointSync(std::move(client),
                                                              synced_run_uri(cfg.output.sync, run_id), run_dir,
                                                              std::max<std::uint64_t>(part_bytes, 1), std::move(log)));
}

CheckpointSync::CheckpointSync(std::unique_ptr<storage::S3Client> client, storage::S3Uri run, fs::path run_dir,
                               std::uint64_t part_bytes, Log log)
    : client_(std::move(client)),
      run_(std::move(run)),
      run_dir_(std::move(run_dir)),
      staging_(run_dir_ / ".sync"),
      part_bytes_(part_bytes),
      log_(std::move(log)) {
    fs::remove_all(staging_);  // links a killed run left; their steps are queued again by nobody, as intended
    fs::create_directories(staging_);
    thread_ = std::thread([this] { worker(); });
}

CheckpointSync::~CheckpointSync() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    client_->cancel();  // an upload still going (the run ended by an error, or finish() timed out) stops now
    if (thread_.joinable()) thread_.join();
    std::error_code ec;
    fs::remove_all(staging_, ec);
}

void CheckpointSync::checkpoint_saved(const fs::path& step_dir) {
    const auto step = parse_step_dir_name(step_dir.filename().string());
    if (!step) return;
    Job job{*step, staging_ / fmt::format("{}-{}", step_dir.filename().string(), ::getpid())};
    fs::remove_all(job.staged);
    fs::create_directories(job.staged);
    for (const auto& e : fs::directory_iterator(step_dir))
        if (e.is_regular_file()) fs::create_hard_link(e.path(), job.staged / e.path().filename());
    {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(std::move(job));
    }
    cv_.notify_all();
}

bool CheckpointSync::finish(double timeout_s) {
    std::unique_lock<std::mutex> lock(mu_);
    queue_.push_back(Job{});
    cv_.notify_all();
    const bool drained = cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                                      [&] { return queue_.empty() && !busy_; });
    if (!drained)
        log_(fmt::format(
            "sync: {} upload(s) to {} not finished after {:.0f} s; their steps have no {} and do not count "
            "as synced",
            queue_.size() + (busy_ ? 1 : 0), run_.str(), timeout_s, kSyncedMarker));
    return drained && !failed_;
}

void CheckpointSync::worker() {
    for (;;) {
        Job job;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            if (stop_) return;
            job = queue_.front();
            queue_.pop_front();
            busy_ = true;
        }
        try {
            if (job.step >= 0)
                upload_step(job);
            else
                upload_run_files();
        } catch (const std::exception& e) {
            std::lock_guard<std::mutex> lock(mu_);
            failed_ = true;
            log_(fmt::format("sync: {}", e.what()));
        }
        std::error_code ec;
        if (!job.staged.empty()) fs::remove_all(job.staged, ec);
        {
            std::lock_guard<std::mutex> lock(mu_);
            busy_ = false;
        }
        cv_.notify_all();
    }
}

void CheckpointSync::upload_step(const Job& job) {
    const storage::S3Uri dir = run_.join("checkpoints/" + step_dir_name(job.step));
    storage::TransferOptions opts;
    opts.part_bytes = part_bytes_;
    nlohmann::json files = nlohmann::json::array();
    int parts = 0;
    for (const auto& e : fs::directory_iterator(job.staged)) {
        const int n = storage::upload_file(*client_, e.path(), dir.join(e.path().filename().string()), opts);
        files.push_back({{"name", e.path().filename().string()}, {"size", fs::file_size(e.path())}, {"parts", n}});
        parts += n;
    }
    // Last: the marker says every file above was acknowledged whole.
    client_->put_object(dir.join(kSyncedMarker), nlohmann::json{{"step", job.step}, {"files", files}}.dump(2) + "\n");
    upload_run_files();
    log_(fmt::format("sync: {} uploaded to {} ({} files in {} parts)", step_dir_name(job.step), dir.str(),
                     files.size(), parts));
}

void CheckpointSync::upload_run_files() {
    storage::TransferOptions opts;
    opts.part_bytes = part_bytes_;
    for (const auto& name : synced_run_files())
        if (fs::is_regular_file(run_dir_ / name))
            storage::upload_file(*client_, run_dir_ / name, run_.join(name), opts);
}

}  // namespace llmt::train
