#include "train/run_dir.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

#include "config/emit.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/time.h"
#include "core/version.h"

namespace llmt::train {

std::string RunDir::make_run_id(const std::string& name) {
    // The suffix starts at a random point per process (/dev/urandom: processes started in the same second differ)
    // and steps by one per call, so ids made by one process never repeat (for 2^24 calls); independent draws
    // per call would collide within a process (birthday bound: 200 ids in one second share one once in ~800).
    static std::atomic<uint32_t> next{std::random_device{}()};
    return fmt::format("{}-{}-{:06x}", name, utc_compact_now(), next.fetch_add(1) & 0xFFFFFFu);
}

namespace {

// mkdir (not create_directories) so that two processes racing for one id cannot both win. Returns errno (0: made).
int make_run_dir(const std::filesystem::path& dir) { return ::mkdir(dir.c_str(), 0755) == 0 ? 0 : errno; }

}  // namespace

nlohmann::ordered_json make_meta_json(const RunMeta& meta, const std::string& run_id) {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    const auto& b = build_info();
    nlohmann::ordered_json j = {{"run_id", run_id},
            {"llmtrain_version", b.version},
            {"git_sha", b.git_sha},
            {"build_type", b.build_type},
            {"argv", meta.argv},
            {"hostname", host},
            {"pid", static_cast<int64_t>(::getpid())},
            {"start_time_utc", utc_iso8601_now()},
            {"world_size", meta.world_size},
            {"device", meta.device}};
    if (!meta.precision.is_null()) j["precision"] = meta.precision;
    return j;
}

RunDir RunDir::create(const config::Config& cfg, const RunMeta& meta) {
    const bool generated = cfg.output.run_id.empty();
    std::string run_id = generated ? make_run_id(cfg.run.name) : cfg.output.run_id;
    std::filesystem::path root = cfg.output.root_dir;
    make_dirs(root);
    std::filesystem::path dir = root / run_id;
    int err = make_run_dir(dir);
    // A generated id that another process took in the same second is drawn again; a named one is the user's.
    for (int tries = 0; generated && err == EEXIST && tries < 16; ++tries) {
        run_id = make_run_id(cfg.run.name);
        dir = root / run_id;
        err = make_run_dir(dir);
    }
    if (err == EEXIST)
        throw InputError(fmt::format(
                "run directory '{}' already exists; resume it with --resume {} (or --resume auto), "
                "or choose another output.run_id",
                dir.string(), run_id));
    if (err != 0) throw IoError(fmt::format("cannot create run directory '{}': {}", dir.string(), std::strerror(err)));
    RunDir rd(dir, run_id);
    make_dirs(rd.logs_dir());
    make_dirs(rd.checkpoints_dir());
    write_file_atomic(rd.config_path(),
                      fmt::format("# resolved config of run {} (from {})\n{}", run_id, cfg.source,
                                  config::to_yaml(cfg.resolved, false)));
    write_file_atomic(rd.meta_path(), make_meta_json(meta, run_id).dump(2) + "\n");
    return rd;
}

RunDir RunDir::open(const std::filesystem::path& dir) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
        throw InputError(fmt::format("run directory '{}' does not exist", dir.string()));
    if (!std::filesystem::exists(dir / "config.yaml", ec))
        throw InputError(fmt::format("'{}' is not a run directory: it has no config.yaml", dir.string()));
    return RunDir(dir, dir.filename().string());
}

}  // namespace llmt::train
