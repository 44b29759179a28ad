#include "tracking/tracker.h"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdlib>

#include "config/config.h"
#include "config/emit.h"
#include "config/schema.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "tracking/mlflow_file_store.h"
#include "tracking/mlflow_rest_store.h"
#include "tracking/mlflow_sink.h"
#include "tracking/tensorboard_sink.h"

namespace llmt::tracking {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxParamValue = 6000;  // MLflow 2.x's MAX_PARAM_VAL_LENGTH

bool is_http(const std::string& uri) { return uri.rfind("http://", 0) == 0 || uri.rfind("https://", 0) == 0; }

// Every resolved config key as an MLflow param ("trainer.lr" -> "0.0003").
void flatten(const nlohmann::ordered_json& j, const std::string& prefix, std::vector<KeyValue>& out) {
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
        if (it.value().is_object()) {
            flatten(it.value(), key, out);
            continue;
        }
        std::string v = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
        if (v.size() > kMaxParamValue) v = v.substr(0, kMaxParamValue - 3) + "...";
        out.push_back({key, v});
    }
}

std::unique_ptr<MlflowStore> open_store(const std::string& uri) {
    if (is_http(uri)) return std::make_unique<MlflowRestStore>(uri, RestAuth::from_env());
    return std::make_unique<MlflowFileStore>(*config::local_path_of_uri(uri));
}

// The run directory's record of its MLflow run, if it was made for the same store.
std::string recorded_run_id(const fs::path& run_dir, const std::string& uri) {
    std::error_code ec;
    const fs::path file = run_dir / kMlflowRunFile;
    if (!fs::exists(file, ec)) return "";
    auto j = try_parse_json(read_file(file, 1 << 16));
    if (!j || !j->is_object() || j->value("uri", "") != uri) return "";
    return j->value("run_id", "");
}

RunStatus status_of(int exit_code) {
    if (exit_code == 0) return RunStatus::kFinished;
    if (exit_code == 128 + SIGTERM || exit_code == 128 + SIGINT) return RunStatus::kKilled;
    return RunStatus::kFailed;
}

}  // namespace

std::string mlflow_uri(const config::Config& cfg) {
    if (!cfg.tracking.mlflow.uri.empty()) return cfg.tracking.mlflow.uri;
    const char* env = std::getenv("MLFLOW_TRACKING_URI");
    return env ? env : "";
}

Tracker::Tracker(const config::Config& cfg, const fs::path& run_dir, const std::string& run_id, int rank,
                 int64_t start_step, TrackerOptions opts)
    : opts_(opts) {
    if (rank != 0) return;
    const std::string uri = mlflow_uri(cfg);
    if (!uri.empty() && !is_http(uri) && !config::local_path_of_uri(uri))
        throw ConfigError(fmt::format("MLFLOW_TRACKING_URI \"{}\" (used because tracking.mlflow.uri is empty): "
                                      "expected a directory, a file: URI or an http(s):// URL",
                                      uri.substr(0, 200)));
    if (!cfg.tracking.tensorboard_dir.empty())
        tb_ = std::make_unique<TensorBoardSink>(fs::path(cfg.tracking.tensorboard_dir) / run_id,
                                                config::to_yaml(cfg.resolved, false), start_step);
    if (uri.empty()) return;
    MlflowRunSpec spec;
    spec.experiment = cfg.tracking.mlflow.experiment;
    spec.run_name = cfg.tracking.mlflow.run_name.empty() ? run_id : cfg.tracking.mlflow.run_name;
    flatten(cfg.resolved, "", spec.params);
    spec.tags = {{"mlflow.source.name", "llmtrain"},
                 {"mlflow.source.type", "LOCAL"},
                 {"llmtrain.run_id", run_id},
                 {"llmtrain.run_dir", fs::absolute(run_dir).string()},
                 // Where the trained model is: the latest step directory is an HF model directory.
                 {"llmtrain.checkpoints", fs::absolute(run_dir / "checkpoints").string()}};
    spec.resume_run_id = recorded_run_id(run_dir, uri);
    spec.on_started = [run_dir, uri](const std::string& experiment_id, const std::string& id) {
        nlohmann::ordered_json j = {{"uri", uri}, {"experiment_id", experiment_id}, {"run_id", id}};
        try {
            write_file_atomic(run_dir / kMlflowRunFile, j.dump(2) + "\n");
        } catch (const std::exception& e) {
            std::fprintf(stderr, "tracking: %s (a resumed run will start a new MLflow run)\n", e.what());
        }
    };
    spec.backoff_first_s = opts.backoff_first_s;
    spec.backoff_max_s = opts.backoff_max_s;
    mlflow_ = std::make_unique<MlflowSink>(open_store(uri), std::move(spec));
}

Tracker::~Tracker() {
    if (!finished_) finish(1);
}

void Tracker::log(const nlohmann::ordered_json& record) {
    if (!active()) return;
    const auto metrics = metrics_of(record, now_ms());
    if (metrics.empty()) return;
    if (tb_) {
        std::vector<std::pair<std::string, double>> scalars;
        for (const auto& m : metrics) scalars.push_back({m.key, m.value});
        tb_->log(metrics.front().step, static_cast<double>(metrics.front().timestamp_ms) / 1e3, std::move(scalars));
    }
    if (mlflow_) mlflow_->log(metrics);
}

void Tracker::finish(int exit_code) {
    if (finished_) return;
    finished_ = true;
    if (tb_) tb_->finish();
    if (mlflow_) mlflow_->finish(status_of(exit_code), opts_.finish_timeout_s);
}

}  // namespace llmt::tracking
