#include "tracking/mlflow_file_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <regex>

#include "core/error.h"
#include "core/fs.h"
#include "core/unique_fd.h"

namespace llmt::tracking {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDefaultExperimentId = "0";
constexpr const char* kDefaultExperimentName = "Default";
constexpr int kSourceTypeLocal = 4;  // mlflow.entities.SourceType.LOCAL

// FileStore stores RunStatus as its proto enum number.
int status_number(RunStatus s) {
    switch (s) {
        case RunStatus::kRunning: return 1;
        case RunStatus::kFinished: return 3;
        case RunStatus::kFailed: return 4;
        case RunStatus::kKilled: return 5;
    }
    return 1;
}

// A YAML single-quoted scalar: PyYAML's safe_load reads it back as the same string.
std::string quoted(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

void write_text_atomic(const fs::path& p, const std::string& text) { write_file_atomic(p, text); }

// Metric, param and tag names become file names: MLflow's own rule (alphanumerics, '_', '-', '.', ' ',
// '/') and no component that climbs.
void check_key(const std::string& key, const char* what) {
    static const std::regex kKey(R"(^[A-Za-z0-9_\-. /]{1,250}$)");
    bool ok = std::regex_match(key, kKey) && key.front() != '/';
    for (const auto& part : fs::path(key)) ok = ok && part != ".." && part != ".";
    if (!ok)
        throw std::invalid_argument(fmt::format("MLflow {} name \"{}\" is not valid (letters, digits, '_', '-', '.', "
                                                "' ', '/'; no '..')",
                                                what, key));
}

std::string user_name() {
    for (const char* v : {"USER", "LOGNAME"})
        if (const char* u = std::getenv(v); u && *u) return u;
    return "unknown";
}

// An flock held for the lifetime of the object.
class DirLock {
public:
    explicit DirLock(const fs::path& file) {
        fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ < 0) throw IoError(fmt::format("cannot open '{}': {}", file.string(), std::strerror(errno)));
        while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
        }
    }
    ~DirLock() { ::close(fd_); }
    DirLock(const DirLock&) = delete;
    DirLock& operator=(const DirLock&) = delete;

private:
    int fd_ = -1;
};

std::string experiment_meta(const std::string& id, const std::string& name, const fs::path& root, int64_t now) {
    return fmt::format("artifact_location: {}\ncreation_time: {}\nexperiment_id: {}\nlast_update_time: {}\n"
                       "lifecycle_stage: active\nname: {}\n",
                       quoted(file_uri_of(root / id)), now, quoted(id), now, quoted(name));
}

struct RunMeta {
    std::string run_id, run_name, experiment_id, artifact_uri, user_id;
    int status = 1;
    int64_t start_time = 0, end_time = -1;
};

std::string run_meta_text(const RunMeta& m) {
    return fmt::format("artifact_uri: {}\nend_time: {}\nentry_point_name: ''\nexperiment_id: {}\n"
                       "lifecycle_stage: active\nrun_id: {}\nrun_name: {}\nrun_uuid: {}\nsource_name: ''\n"
                       "source_type: {}\nsource_version: ''\nstart_time: {}\nstatus: {}\ntags: []\nuser_id: {}\n",
                       quoted(m.artifact_uri), m.end_time < 0 ? std::string("null") : std::to_string(m.end_time),
                       quoted(m.experiment_id), m.run_id, quoted(m.run_name), m.run_id, kSourceTypeLocal,
                       m.start_time, m.status, quoted(m.user_id));
}

RunMeta read_run_meta(const fs::path& file) {
    try {
        const YAML::Node n = YAML::LoadFile(file.string());
        RunMeta m;
        m.run_id = n["run_id"].as<std::string>();
        m.run_name = n["run_name"] ? n["run_name"].as<std::string>("") : "";
        m.experiment_id = n["experiment_id"].as<std::string>();
        m.artifact_uri = n["artifact_uri"].as<std::string>("");
        m.user_id = n["user_id"].as<std::string>("");
        m.status = n["status"].as<int>(1);
        m.start_time = n["start_time"].as<int64_t>(0);
        m.end_time = n["end_time"] && !n["end_time"].IsNull() ? n["end_time"].as<int64_t>() : -1;
        return m;
    } catch (const YAML::Exception& e) {
        throw FormatError(fmt::format("'{}': not an MLflow run meta.yaml: {}", file.string(), e.what()));
    }
}

// The repr Python gives a float, closely enough for float() to read back the same double: the
// shortest round-trip form ("0.1", "1e-05", "nan", "inf").
std::string metric_value_text(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return fmt::format("{}", v);
}

}  // namespace

std::string file_uri_of(const fs::path& absolute) {
    std::string out = "file://";
    for (unsigned char c : absolute.string()) {
        if (std::isalnum(c) || std::strchr("/-._~", c)) out += static_cast<char>(c);
        else out += fmt::format("%{:02X}", c);
    }
    return out;
}

MlflowFileStore::MlflowFileStore(const fs::path& root) : root_(fs::absolute(root).lexically_normal()) {}

std::string MlflowFileStore::describe() const { return "file store " + root_.string(); }

void MlflowFileStore::ensure_root() {
    std::error_code ec;
    fs::create_directories(root_ / ".trash", ec);
    if (ec) throw IoError(fmt::format("cannot create the MLflow file store '{}': {}", root_.string(), ec.message()));
    if (!fs::exists(root_ / kDefaultExperimentId / "meta.yaml")) {
        fs::create_directories(root_ / kDefaultExperimentId, ec);
        write_text_atomic(root_ / kDefaultExperimentId / "meta.yaml",
                          experiment_meta(kDefaultExperimentId, kDefaultExperimentName, root_, now_ms()));
    }
}

std::string MlflowFileStore::experiment_id(const std::string& name) {
    fs::create_directories(root_);
    DirLock lock(root_ / ".llmtrain.lock");
    ensure_root();
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root_, ec)) {
        if (!e.is_directory() || e.path().filename() == ".trash") continue;
        try {
            const YAML::Node n = YAML::LoadFile((e.path() / "meta.yaml").string());
            const bool active = n["lifecycle_stage"].as<std::string>("") == "active";
            if (n["name"] && n["name"].as<std::string>() == name && active)
                return n["experiment_id"].as<std::string>();
        } catch (const YAML::Exception&) {
            continue;  // not an experiment (FileStore skips malformed ones too)
        }
    }
    // A new id as recent FileStores make them: a random positive integer, unique in the store.
    std::random_device rd;
    std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(now_ms()));
    std::string id;
    do id = std::to_string(rng() >> 2);
    while (fs::exists(root_ / id) || fs::exists(root_ / ".trash" / id));
    fs::create_directories(root_ / id);
    write_text_atomic(root_ / id / "meta.yaml", experiment_meta(id, name, root_, now_ms()));
    return id;
}

std::string MlflowFileStore::create_run(const std::string& experiment_id, const std::string& run_name,
                                        int64_t start_ms, const std::vector<KeyValue>& tags) {
    ensure_root();
    const fs::path exp = root_ / experiment_id;
    if (!fs::exists(exp / "meta.yaml"))
        throw std::invalid_argument(
            fmt::format("MLflow experiment {} does not exist in '{}'", experiment_id, root_.string()));
    std::random_device rd;
    std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd());
    RunMeta m;
    m.run_id = fmt::format("{:016x}{:016x}", rng(), rng());  // uuid4().hex's shape: 32 hex digits
    m.run_name = run_name;
    m.experiment_id = experiment_id;
    m.artifact_uri = file_uri_of(exp / m.run_id / "artifacts");
    m.user_id = user_name();
    m.start_time = start_ms;
    const fs::path dir = exp / m.run_id;
    for (const char* sub : {"metrics", "params", "artifacts", "tags"}) fs::create_directories(dir / sub);
    write_text_atomic(dir / "meta.yaml", run_meta_text(m));
    LogBatch b;
    b.tags = tags;
    b.tags.push_back({"mlflow.runName", run_name});
    log_batch(m.run_id, b);
    return m.run_id;
}

fs::path MlflowFileStore::run_dir(const std::string& run_id) {
    static const std::regex kRunId(R"(^[A-Za-z0-9][A-Za-z0-9_\-]{0,255}$)");  // MLflow's _validate_run_id
    if (!std::regex_match(run_id, kRunId))
        throw std::invalid_argument("MLflow run id \"" + run_id + "\" is not valid");
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root_, ec))
        if (e.is_directory() && e.path().filename() != ".trash" && fs::exists(e.path() / run_id / "meta.yaml"))
            return e.path() / run_id;
    throw std::invalid_argument(fmt::format("MLflow run {} is not in '{}'", run_id, root_.string()));
}

bool MlflowFileStore::has_run(const std::string& run_id) {
    try {
        run_dir(run_id);
        return true;
    } catch (const std::invalid_argument&) {
        return false;
    }
}

void MlflowFileStore::log_batch(const std::string& run_id, const LogBatch& batch) {
    const fs::path dir = run_dir(run_id);
    for (const auto& [key, value] : batch.params) {
        check_key(key, "param");
        const fs::path p = dir / "params" / key;
        if (fs::exists(p)) {
            if (read_file(p) != value)
                throw std::invalid_argument(fmt::format("MLflow param \"{}\" was already logged with another value "
                                                        "(params are immutable)",
                                                        key));
            continue;
        }
        fs::create_directories(p.parent_path());
        write_text_atomic(p, value);
    }
    // Grouped by key: one open and one append per metric file per batch.
    std::map<std::string, std::string> lines;
    for (const auto& m : batch.metrics) {
        check_key(m.key, "metric");
        lines[m.key] += fmt::format("{} {} {}\n", m.timestamp_ms, metric_value_text(m.value), m.step);
    }
    for (const auto& [key, text] : lines) {
        const fs::path p = dir / "metrics" / key;
        fs::create_directories(p.parent_path());
        std::FILE* f = std::fopen(p.c_str(), "a");
        if (!f) throw IoError(fmt::format("cannot append to '{}': {}", p.string(), std::strerror(errno)));
        const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
        if (std::fclose(f) != 0 || !ok) throw IoError(fmt::format("cannot append to '{}'", p.string()));
    }
    for (const auto& [key, value] : batch.tags) {
        check_key(key, "tag");
        const fs::path p = dir / "tags" / key;
        fs::create_directories(p.parent_path());
        write_text_atomic(p, value);
    }
}

void MlflowFileStore::update_run(const std::string& run_id, RunStatus status, int64_t end_ms) {
    const fs::path file = run_dir(run_id) / "meta.yaml";
    RunMeta m = read_run_meta(file);
    m.status = status_number(status);
    m.end_time = end_ms;
    write_text_atomic(file, run_meta_text(m));
}

}  // namespace llmt::tracking
