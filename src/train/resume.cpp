#include "train/resume.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdio>
#include <set>

#include "core/error.h"
#include "core/regular_file.h"
#include "storage/s3_uri.h"
#include "train/checkpoint.h"
#include "train/remote_checkpoint.h"

namespace llmt::train {

namespace {

bool has_checkpoint(const std::filesystem::path& run_dir) {
    return !list_checkpoint_steps(run_dir / "checkpoints").empty();
}

}  // namespace

ResumeTarget resolve_resume(const std::string& spec, const config::Config& cfg) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path root = cfg.output.root_dir;
    if (storage::is_s3_uri(spec)) {  // fetched into the local cache, then resumed from there
        const fs::path step_dir = fetch_for_resume(spec, cfg);
        return {step_dir.parent_path().parent_path(), step_dir};
    }
    if (spec == "auto") {
        if (cfg.output.run_id.empty())
            throw InputError("--resume auto needs output.run_id (the run to resume or start), e.g. "
                             "--set output.run_id=my-run");
        fetch_newer_for_auto(cfg, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
        fs::path dir = root / cfg.output.run_id;
        if (fs::is_directory(dir, ec) && has_checkpoint(dir)) {
            auto step = latest_step(dir / "checkpoints");
            auto steps = list_checkpoint_steps(dir / "checkpoints");
            int64_t s = step ? *step : steps.back();
            return {dir, dir / "checkpoints" / step_dir_name(s)};
        }
        return {dir, std::nullopt};
    }
    if (spec.empty()) throw UsageError("--resume needs a path, a run id or 'auto' (got an empty string)");
    std::vector<fs::path> tried;
    fs::path p(spec);

    // A step_N directory.
    if (parse_step_dir_name(p.filename().string()) && fs::is_directory(p, ec))
        return {p.parent_path().parent_path(), p};
    tried.push_back(p);
    // A checkpoints directory, or a run directory.
    for (const fs::path& run : {p.filename() == "checkpoints" ? p.parent_path() : p, root / spec}) {
        if (run != p) tried.push_back(run);
        if (fs::is_directory(run, ec)) {
            if (!has_checkpoint(run))
                throw InputError(fmt::format("--resume {}: run directory '{}' has no checkpoint under {}/checkpoints",
                                             spec, run.string(), run.string()));
            auto step = latest_step(run / "checkpoints");
            int64_t s = step ? *step : list_checkpoint_steps(run / "checkpoints").back();
            return {run, run / "checkpoints" / step_dir_name(s)};
        }
    }
    // Only stat, never open: a FIFO given here must not block.
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
        throw InputError(fmt::format("--resume {}: '{}' is {}, expected a run directory, a checkpoints directory "
                                     "or a step_<N> directory",
                                     spec, p.string(), file_type_name(st.st_mode)));
    }
    std::string places;
    for (const auto& t : tried) places += "\n  " + t.string();
    throw InputError(fmt::format("--resume {}: no run or checkpoint found; looked for:{}", spec, places));
}

ConfigDiff diff_for_resume(const nlohmann::json& saved, const nlohmann::json& current) {
    static const std::set<std::string> kIdentitySections = {"model", "lora"};
    static const std::set<std::string> kIdentityKeys = {
        "data.source",       "data.paths",     "data.text_field",   "data.tokenizer", "data.val_fraction",
        "data.split",        "data.val_split", "data.config_name", "data.revision",
        "data.train_shards", "data.val_shards", "data.shard_format", "data.shuffle",   "run.seed",
        "schema_version"};
    static const std::set<std::string> kCadence = {"trainer.max_steps",        "trainer.eval_every_steps",
                                                   "trainer.save_every_steps", "trainer.log_every_steps",
                                                   "trainer.eval_steps",       "trainer.keep_last"};
    // Where a run lives may differ (a pod mounts it elsewhere); it is not part of the model.
    static const std::set<std::string> kIgnored = {"output.root_dir", "output.run_id", "run.name", "run.threads"};
    ConfigDiff d;
    auto visit = [&](const std::string& path, const nlohmann::json& a, const nlohmann::json& b) {
        if (a == b || kIgnored.count(path)) return;
        std::string line = fmt::format("{}: {} -> {}", path, a.dump(), b.dump());
        auto section = path.substr(0, path.find('.'));
        if (kIdentitySections.count(section) || kIdentityKeys.count(path)) d.identity.push_back(line);
        else if (kCadence.count(path)) d.cadence.push_back(line);
        else d.other.push_back(line);
    };
    for (auto it = current.begin(); it != current.end(); ++it) {
        const nlohmann::json empty;
        if (it.value().is_object()) {
            const auto& s = saved.contains(it.key()) ? saved[it.key()] : empty;
            for (auto jt = it.value().begin(); jt != it.value().end(); ++jt)
                visit(it.key() + "." + jt.key(), s.is_object() && s.contains(jt.key()) ? s[jt.key()] : empty,
                      jt.value());
        } else {
            visit(it.key(), saved.contains(it.key()) ? saved[it.key()] : empty, it.value());
        }
    }
    return d;
}

}  // namespace llmt::train
