// A failed worker's report for the launcher's log, as torchrun's ChildFailedError shows it: rank, exit code,
// pid, host, time, and what the worker wrote to its TORCHELASTIC_ERROR_FILE (torch's
// torch.distributed.elastic.multiprocessing.errors.record writes {"message": {"message": "<Type>: <text>",
// "extraInfo": {"py_callstack": ..., "timestamp": ...}}}; a plain string "message" is accepted too).
#pragma once

#include <sys/types.h>

#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace llmt::launch {

struct WorkerFailure {
    int rank = 0, local_rank = 0;
    pid_t pid = -1;
    int exit_code = 0;       // 128 + signal for a signal
    std::time_t when = 0;    // when the launcher saw it exit
    std::string error_file;  // its TORCHELASTIC_ERROR_FILE; empty when none was given
};

// The error file's message and traceback as text; nullopt when the file does not exist (the worker wrote
// none). A file that is not the expected JSON yields a one-line note saying so, never an exception.
std::optional<std::string> read_error_file(const std::string& path);

// Several lines: "worker rank R (local rank L, pid P) on HOST failed at TIME with exit code C" (or the signal),
// then the error file's content indented, or a note that the worker wrote none.
std::string describe_failure(const WorkerFailure& f, const std::string& hostname);

// The root cause among an attempt's failures (non-empty, in the order the launcher saw them exit): the one
// whose error file was written first (a peer that failed because of it writes its own file later, but may
// be reaped first), else the first seen. torchrun orders by the error file's timestamp the same way.
const WorkerFailure& root_cause(const std::vector<WorkerFailure>& failures);

// "exit code 3" or "signal 9 (SIGKILL, exit code 137)".
std::string describe_exit_code(int code);

}  // namespace llmt::launch
