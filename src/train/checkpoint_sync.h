// output.sync: rank 0 uploads each committed checkpoint, then the run's small files, to object storage
// on a background thread, so training never waits on the store (remote_checkpoint.h has the layout).
// A step is queued as hard links to its files (taken at once, so keep_last pruning or the next save
// cannot change what is uploaded); each file goes up whole or in parts (storage/transfer.h), and the
// marker object goes last, only after every part of every file was acknowledged. A step whose upload
// fails after the client's retries is reported and left without a marker; the next steps still go.
// Destroying it cancels an upload still in flight (that step keeps no marker); finish() first to wait.
// Thread safety: the trainer's thread calls every method; the uploads run on the object's own thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "storage/s3_uri.h"

namespace llmt::config {
struct Config;
}
namespace llmt::storage {
class S3Client;
}

namespace llmt::train {

class CheckpointSync {
public:
    using Log = std::function<void(const std::string&)>;

    // nullptr when output.sync is empty. Reads the credentials and endpoint from the environment
    // (storage/s3_settings.h): InputError when there are none.
    static std::unique_ptr<CheckpointSync> start(const config::Config& cfg, const std::filesystem::path& run_dir,
                                                 const std::string& run_id, Log log);
    ~CheckpointSync();
    CheckpointSync(const CheckpointSync&) = delete;
    CheckpointSync& operator=(const CheckpointSync&) = delete;

    // Queues a committed step_<N> directory (returns at once).
    void checkpoint_saved(const std::filesystem::path& step_dir);
    // Queues the small files, then waits for everything queued, at most `timeout_s` (what is left is
    // reported, the thread stopped). Returns true when every queued upload succeeded.
    bool finish(double timeout_s);

private:
    CheckpointSync(std::unique_ptr<storage::S3Client> client, storage::S3Uri run, std::filesystem::path run_dir,
                   std::uint64_t part_bytes, Log log);
    struct Job {
        std::int64_t step = -1;          // -1: the run's small files
        std::filesystem::path staged;    // hard links of the step's files
    };
    void worker();
    void upload_step(const Job& job);
    void upload_run_files();

    std::unique_ptr<storage::S3Client> client_;
    storage::S3Uri run_;
    std::filesystem::path run_dir_, staging_;
    std::uint64_t part_bytes_;
    Log log_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Job> queue_;
    bool busy_ = false, stop_ = false, failed_ = false;
    std::thread thread_;
};

}  // namespace llmt::train
