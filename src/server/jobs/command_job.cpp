// Command jobs (command_job.h): the request field, who may submit one, its estimate and its environment.
#include "server/jobs/command_job.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "core/knobs.h"

namespace llmt::server {

namespace {
constexpr std::size_t kMaxCommandArgs = 256;
constexpr std::size_t kMaxArgBytes = 4096;
}  // namespace

std::vector<std::string> parse_command(const nlohmann::json& command) {
    if (!command.is_array() || command.empty() || command.size() > kMaxCommandArgs) {
        throw ApiError(400, "invalid_field",
                       fmt::format("command must be an array of 1 to {} strings, e.g. [\"python3\", \"train.py\"]",
                                   kMaxCommandArgs),
                       "command");
    }
    std::vector<std::string> out;
    for (std::size_t i = 0; i < command.size(); ++i) {
        const auto& a = command[i];
        const std::string field = fmt::format("command[{}]", i);
        if (!a.is_string()) throw ApiError(400, "invalid_field", field + " must be a string", field);
        const std::string s = a.get<std::string>();
        if (s.size() > kMaxArgBytes || s.find('\0') != std::string::npos || (i == 0 && s.empty())) {
            throw ApiError(400, "invalid_field",
                           fmt::format("{} must be at most {} bytes without NUL{}", field, kMaxArgBytes,
                                       i == 0 ? ", and the program name must not be empty" : ""),
                           field);
        }
        out.push_back(s);
    }
    return out;
}

void check_command_job_allowed(bool allowed, const Principal& who) {
    if (!allowed) {
        throw ApiError(403, "command_jobs_disabled",
                       "this server does not run command jobs (they run arbitrary programs as the server's user): "
                       "the operator enables them with `llmtrain serve --allow-command-jobs`",
                       "command");
    }
    if (who.role < Role::kRunner) {
        throw ApiError(403, "forbidden",
                       fmt::format("token '{}' has role {}; a command job runs an arbitrary program and needs role "
                                   "runner or admin (the tokens file's third column)",
                                   who.name, role_name(who.role)),
                       "command");
    }
}

nlohmann::json estimate_command_job(const JobSpec& spec, const Rates& rates) {
    const bool gpu = spec.gpus_per_node > 0;
    const int devices = gpu ? spec.gpus() : spec.cpus();
    nlohmann::json e = {{"world_size", spec.cpus()}, {"device", gpu ? "cuda" : "cpu"}, {"max_steps", 0},
                        {"command", true}};
    if (spec.max_runtime_s <= 0) {
        e["source"] = "unmeasured";
        e["reason"] = "a command job runs a program whose speed the server does not know; give max_runtime_s for "
                      "an upper bound of its cost (its actual cost is wall time x devices x rate)";
        e["duration_s"] = nullptr;
        e["device_hours"] = nullptr;
        e["cost_usd"] = nullptr;
        return e;
    }
    const double device_hours = spec.max_runtime_s / 3600.0 * devices;
    e["source"] = "max_runtime_s";
    e["basis"] = "upper bound: the job is stopped at max_runtime_s";
    e["duration_s"] = spec.max_runtime_s;
    e["device_hours"] = device_hours;
    e["cost_usd"] = device_hours * (gpu ? rates.gpu_hour_usd : rates.cpu_hour_usd);
    return e;
}

std::vector<std::string> command_job_env(const std::filesystem::path& run_dir) {
    return {fmt::format("{}={}", location_name(Location::kMetricsFile), (run_dir / "metrics.jsonl").string()),
            fmt::format("{}={}", location_name(Location::kOutputDir), run_dir.string())};
}

std::vector<std::string> command_job_launch_args(const JobSpec& spec) {
    std::vector<std::string> a = {"launch", "--standalone", "--max-restarts", "0", "--nproc-per-node",
                                  std::to_string(spec.nproc_per_node), "--no-python", "--"};
    a.insert(a.end(), spec.command.begin(), spec.command.end());
    return a;
}

}  // namespace llmt::server
