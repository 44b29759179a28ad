// Where a launch keeps its workers' files, as torchrun's agent lays them out:
//   <log dir>/<run id>_<random>/attempt_<restart>/<local rank>/{stdout.log, stderr.log, error.json}
// and which streams go to those files (torchrun's --redirects and --tee). error.json is the worker's
// TORCHELASTIC_ERROR_FILE (error_file.h reads it back).
#pragma once

#include <string>
#include <vector>

namespace llmt::launch {

// Bits of torchrun's Std: 0 none, 1 stdout, 2 stderr, 3 both.
inline constexpr int kStdOut = 1;
inline constexpr int kStdErr = 2;

// A --redirects/--tee value for each local rank: "N" (every rank) or "LR:N,LR:N,..." (ranks not named get 0),
// N in 0..3. Throws UsageError naming `flag` for anything else or a local rank >= nproc_per_node.
std::vector<int> parse_std_spec(const std::string& text, int nproc_per_node, const char* flag);

// The directories of one launch. Not thread-safe.
class WorkerLogs {
public:
    // Creates <base>/<run_id>_XXXXXX; `base` is --log-dir, created if missing, or "" for a new temporary
    // directory (removed by remove_if_temporary). Throws IoError naming the directory.
    WorkerLogs(const std::string& base, const std::string& run_id);

    // Empties and creates attempt_<restart>/<local rank>/ for every local rank; throws IoError.
    void prepare_attempt(int restart_count, int nproc_per_node) const;
    std::string rank_dir(int restart_count, int local_rank) const;
    std::string error_file(int restart_count, int local_rank) const {
        return rank_dir(restart_count, local_rank) + "/error.json";
    }
    std::string stdout_file(int restart_count, int local_rank) const {
        return rank_dir(restart_count, local_rank) + "/stdout.log";
    }
    std::string stderr_file(int restart_count, int local_rank) const {
        return rank_dir(restart_count, local_rank) + "/stderr.log";
    }
    const std::string& run_dir() const { return run_dir_; }

    // Deletes everything when the base directory was a temporary one (the run succeeded, nothing to read).
    void remove_if_temporary() const;

private:
    std::string base_, run_dir_;
    bool temporary_ = false;
};

}  // namespace llmt::launch
