// Worker log and error-file directories (worker_logs.h), after torchrun's LocalElasticAgent._make_log_dir
// and start_processes' per-rank layout.
#include "launch/worker_logs.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace llmt::launch {
namespace {

namespace fs = std::filesystem;

int parse_std_value(const std::string& v, const std::string& text, const char* flag) {
    if (v.size() != 1 || v[0] < '0' || v[0] > '3') {
        throw UsageError(fmt::format("{} '{}': expected 0 (none), 1 (stdout), 2 (stderr) or 3 (both), or a map "
                                     "LOCAL_RANK:N,LOCAL_RANK:N",
                                     flag, text));
    }
    return v[0] - '0';
}

std::string make_dir_from_template(const std::string& tmpl) {
    std::string buf = tmpl;
    if (!mkdtemp(buf.data()))
        throw IoError(fmt::format("cannot create a directory {}: {}", tmpl, std::strerror(errno)));
    return buf;
}

}  // namespace

std::vector<int> parse_std_spec(const std::string& text, int nproc_per_node, const char* flag) {
    std::vector<int> per_rank(static_cast<std::size_t>(nproc_per_node), 0);
    if (text.find(':') == std::string::npos) {
        int v = parse_std_value(text, text, flag);
        for (int& r : per_rank) r = v;
        return per_rank;
    }
    std::size_t start = 0;
    while (start <= text.size()) {
        std::size_t comma = text.find(',', start);
        std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        std::size_t colon = item.find(':');
        if (colon == std::string::npos || colon == 0) parse_std_value("?", text, flag);
        int lr = -1;
        try {
            std::size_t used = 0;
            lr = std::stoi(item.substr(0, colon), &used);
            if (used != colon) lr = -1;
        } catch (const std::exception&) {
        }
        if (lr < 0 || lr >= nproc_per_node) {
            throw UsageError(fmt::format("{} '{}': local rank '{}' is not in 0..{}", flag, text, item.substr(0, colon),
                                         nproc_per_node - 1));
        }
        per_rank[static_cast<std::size_t>(lr)] = parse_std_value(item.substr(colon + 1), text, flag);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return per_rank;
}

WorkerLogs::WorkerLogs(const std::string& base, const std::string& run_id) {
    if (base.empty()) {
        const char* tmp = std::getenv("TMPDIR");
        base_ = make_dir_from_template(fmt::format("{}/llmtrain_launch_XXXXXX", tmp && *tmp ? tmp : "/tmp"));
        temporary_ = true;
    } else {
        base_ = base;
        std::error_code ec;
        fs::create_directories(base_, ec);
        if (ec) throw IoError(fmt::format("--log-dir {}: cannot create it: {}", base_, ec.message()));
    }
    run_dir_ = make_dir_from_template(fmt::format("{}/{}_XXXXXX", base_, run_id));
}

std::string WorkerLogs::rank_dir(int restart_count, int local_rank) const {
    return fmt::format("{}/attempt_{}/{}", run_dir_, restart_count, local_rank);
}

void WorkerLogs::prepare_attempt(int restart_count, int nproc_per_node) const {
    const std::string attempt = fmt::format("{}/attempt_{}", run_dir_, restart_count);
    std::error_code ec;
    fs::remove_all(attempt, ec);
    for (int lr = 0; lr < nproc_per_node; ++lr) {
        fs::create_directories(rank_dir(restart_count, lr), ec);
        if (ec) throw IoError(fmt::format("cannot create {}: {}", rank_dir(restart_count, lr), ec.message()));
    }
}

void WorkerLogs::remove_if_temporary() const {
    if (!temporary_) return;
    std::error_code ec;
    fs::remove_all(base_, ec);
}

}  // namespace llmt::launch
