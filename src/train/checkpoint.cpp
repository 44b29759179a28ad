// Checkpoint directories (checkpoint.h, docs/formats/checkpoint.md). Atomicity comes from rename(2)
// of a fully written, fsynced directory and of the small `latest` file; nothing is ever modified in place.
#include "train/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <set>

#include "core/check.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "core/safetensors_integrity.h"
#include "core/strings.h"

namespace fs = std::filesystem;

namespace llmt::train {
namespace {

constexpr const char* kLatest = "latest";
constexpr const char* kBest = "best";
constexpr std::size_t kMaxStateBytes = 64u << 20;

[[noreturn]] void throw_io(const std::string& what, const fs::path& p, int err) {
    throw IoError(fmt::format("{} '{}': {}", what, p.string(), std::strerror(err)));
}

void remove_tree(const fs::path& p) {
    std::error_code ec;
    fs::remove_all(p, ec);
    if (ec) throw IoError(fmt::format("cannot remove '{}': {}", p.string(), ec.message()));
}

// Leftovers of a save or prune that crashed: .tmp-step_<N>-<pid> and .del-step_<N>-<pid>.
bool is_leftover(const std::string& name) {
    return name.rfind(".tmp-step_", 0) == 0 || name.rfind(".del-step_", 0) == 0;
}

std::optional<std::int64_t> read_pointer(const fs::path& root, const char* name) {
    fs::path p = root / name;
    std::error_code ec;
    if (!fs::exists(p, ec)) return std::nullopt;
    std::string text = read_file(p, 4096);
    auto step = parse_step_dir_name(trim(text));
    if (!step) {
        throw CheckpointError(fmt::format("'{}' holds '{}', expected 'step_<N>' naming a checkpoint directory",
                                          p.string(), std::string(trim(text)).substr(0, 100)));
    }
    return step;
}

// state.json's checksum covers the compact dump of the object without the checksum key (checkpoint.h).
std::string state_checksum(const nlohmann::json& state) {
    nlohmann::json body = state;
    body.erase(kStateChecksumKey);
    return crc32c_text(crc32c(body.dump()));
}

// Removes and checks state.json's checksum; false when it has none (an older checkpoint).
bool take_state_checksum(nlohmann::json& state, const fs::path& path) {
    auto it = state.find(kStateChecksumKey);
    if (it == state.end()) return false;
    LLMT_CHECK_AS(FormatError, it->is_string(),
                  "'{}': field \"{}\" must be a string 'crc32c:<8 hex digits>', found {}", path.string(),
                  kStateChecksumKey, it->type_name());
    const std::string recorded = it->get<std::string>();
    std::uint32_t unused = 0;
    LLMT_CHECK_AS(FormatError, parse_crc32c_text(recorded, &unused),
                  "'{}': field \"{}\" is '{}', expected 'crc32c:' and 8 hex digits", path.string(),
                  kStateChecksumKey, recorded.substr(0, 40));
    const std::string computed = state_checksum(state);
    LLMT_CHECK_AS(FormatError, computed == recorded,
                  "'{}' fails its checksum (recorded {}, computed {}): the file is corrupt or was edited (hint: load "
                  "an earlier checkpoint)",
                  path.string(), recorded, computed);
    state.erase(it);
    return true;
}

void check_plain_filename(const std::string& f) {
    LLMT_INTERNAL_CHECK(!f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos,
               "checkpoint file name '{}' must be a plain file name", f);
}

}  // namespace

std::string step_dir_name(std::int64_t step) { return fmt::format("step_{}", step); }

std::optional<std::int64_t> parse_step_dir_name(std::string_view name) {
    constexpr std::string_view kPrefix = "step_";
    if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
    std::string_view digits = name.substr(kPrefix.size());
    if (digits.empty() || digits.size() > 18 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
    std::int64_t v = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc() || ptr != digits.data() + digits.size() || v < 0) return std::nullopt;
    return v;
}

// ---------------------------------------------------------------------------------------------

CheckpointWriter::CheckpointWriter(fs::path root, std::int64_t step, SaveOptions opts)
    : root_(std::move(root)), step_(step), opts_(std::move(opts)) {
    LLMT_INTERNAL_CHECK(step >= 0, "checkpoint step must be >= 0, got {}", step);
    make_dirs(root_);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root_, ec)) {
        if (is_leftover(e.path().filename().string())) remove_tree(e.path());
    }
    if (ec) throw IoError(fmt::format("cannot list '{}': {}", root_.string(), ec.message()));
    tmp_ = root_ / fmt::format(".tmp-{}-{}", step_dir_name(step), ::getpid());
    if (!fs::create_directory(tmp_, ec) || ec) {
        throw IoError(fmt::format("cannot create '{}': {}", tmp_.string(), ec ? ec.message() : "already exists"));
    }
}

CheckpointWriter::~CheckpointWriter() {
    if (!committed_) {
        std::error_code ec;
        fs::remove_all(tmp_, ec);  // best effort; the next writer removes what is left
    }
}

void CheckpointWriter::hook(std::string_view stage) const {
    if (opts_.fault_hook) opts_.fault_hook(stage);
}

void CheckpointWriter::write_tensors(const std::string& filename, const std::vector<TensorRef>& tensors,
                                     const std::map<std::string, std::string>& metadata) {
    check_plain_filename(filename);
    write_safetensors(tmp_ / filename, tensors, metadata);
    hook("after:" + filename);
}

void CheckpointWriter::write_json(const std::string& filename, const nlohmann::json& value) {
    check_plain_filename(filename);
    write_file_atomic(tmp_ / filename, value.dump(2) + "\n");
    hook("after:" + filename);
}

void CheckpointWriter::write_state(const nlohmann::json& state) {
    LLMT_INTERNAL_CHECK(state.is_object(), "checkpoint state must be a JSON object");
    nlohmann::json s = state;
    s[kStateChecksumKey] = state_checksum(s);
    write_json(kStateFile, s);
}

fs::path CheckpointWriter::commit() {
    LLMT_INTERNAL_CHECK(!committed_, "checkpoint {} committed twice", step_);
    LLMT_CHECK_AS(CheckpointError, fs::exists(tmp_ / kModelFile) || fs::exists(tmp_ / models::kHfIndexFile),
                  "checkpoint {}: '{}' was not written", step_, kModelFile);
    LLMT_CHECK_AS(CheckpointError, fs::exists(tmp_ / kStateFile), "checkpoint {}: '{}' was not written", step_,
                  kStateFile);
    hook("before_rename");
    fsync_path(tmp_);
    const fs::path final_dir = root_ / step_dir_name(step_);
    std::error_code ec;
    if (fs::exists(final_dir, ec)) {
        // Saving a step that already exists (a resumed run saving at its start step): swap the two
        // directories atomically so step_<N> is never missing, then remove the old one.
        if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) != 0) {
            if (errno != EINVAL && errno != ENOSYS) throw_io("cannot exchange into place", final_dir, errno);
            // Filesystem without RENAME_EXCHANGE: move the old one aside first (a crash in between
            // leaves no step_<N>; `latest` then names a missing directory and load says so).
            fs::path aside = root_ / fmt::format(".del-{}-{}", step_dir_name(step_), ::getpid());
            if (::rename(final_dir.c_str(), aside.c_str()) != 0) throw_io("cannot move aside", final_dir, errno);
            if (::rename(tmp_.c_str(), final_dir.c_str()) != 0) throw_io("cannot rename into place", final_dir, errno);
            committed_ = true;
            remove_tree(aside);
        } else {
            committed_ = true;
            remove_tree(tmp_);  // now holds the old checkpoint
        }
    } else {
        if (::rename(tmp_.c_str(), final_dir.c_str()) != 0) throw_io("cannot rename into place", final_dir, errno);
        committed_ = true;
    }
    fsync_path(root_);
    hook("before_latest");
    write_file_atomic(root_ / kLatest, step_dir_name(step_) + "\n");
    if (opts_.mark_best) set_best(root_, step_);
    hook("before_prune");
    prune_checkpoints(root_, opts_.keep_last);
    return final_dir;
}

fs::path save_checkpoint(const fs::path& root, std::int64_t step, const std::vector<TensorRef>& model,
                         const std::vector<TensorRef>& optimizer, nlohmann::json state, const SaveOptions& opts,
                         const std::map<std::string, std::string>& model_metadata,
                         const std::map<std::string, std::string>& optimizer_metadata) {
    LLMT_INTERNAL_CHECK(state.is_object(), "checkpoint state must be a JSON object");
    if (state.contains("step")) {
        LLMT_INTERNAL_CHECK(state["step"].is_number_integer() && state["step"].get<std::int64_t>() == step,
                   "checkpoint state has step {} but is saved as step {}", state["step"].dump(), step);
    }
    state["step"] = step;
    CheckpointWriter w(root, step, opts);
    w.write_tensors(kModelFile, model, model_metadata);
    if (!optimizer.empty()) w.write_tensors(kOptimizerFile, optimizer, optimizer_metadata);
    w.write_state(state);
    return w.commit();
}

// ---------------------------------------------------------------------------------------------

std::vector<std::int64_t> list_checkpoint_steps(const fs::path& root) {
    std::vector<std::int64_t> out;
    std::error_code ec;
    if (!fs::is_directory(root, ec)) return out;
    for (const auto& e : fs::directory_iterator(root, ec)) {
        auto step = parse_step_dir_name(e.path().filename().string());
        if (step && e.is_directory(ec) && fs::exists(e.path() / kStateFile, ec)) out.push_back(*step);
    }
    if (ec) throw IoError(fmt::format("cannot list '{}': {}", root.string(), ec.message()));
    std::sort(out.begin(), out.end());
    return out;
}

std::optional<std::int64_t> latest_step(const fs::path& root) { return read_pointer(root, kLatest); }
std::optional<std::int64_t> best_step(const fs::path& root) { return read_pointer(root, kBest); }

void set_best(const fs::path& root, std::int64_t step) {
    fs::path dir = root / step_dir_name(step);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        throw CheckpointError(fmt::format("cannot mark step {} as best: '{}' does not exist", step, dir.string()));
    }
    write_file_atomic(root / kBest, step_dir_name(step) + "\n");
}

void prune_checkpoints(const fs::path& root, int keep_last) {
    if (keep_last <= 0) return;
    std::vector<std::int64_t> steps = list_checkpoint_steps(root);
    std::set<std::int64_t> keep;
    for (std::size_t i = steps.size() > static_cast<std::size_t>(keep_last) ? steps.size() - keep_last : 0;
         i < steps.size(); ++i) {
        keep.insert(steps[i]);
    }
    // A malformed pointer file must not make us delete what it was meant to protect.
    for (auto ptr : {kLatest, kBest}) {
        auto s = read_pointer(root, ptr);
        if (s) keep.insert(*s);
    }
    for (std::int64_t s : steps) {
        if (keep.count(s)) continue;
        // Rename first so a crash mid-removal leaves a .del-* leftover, never a half-deleted step_<N>.
        fs::path dir = root / step_dir_name(s);
        fs::path aside = root / fmt::format(".del-{}-{}", step_dir_name(s), ::getpid());
        if (::rename(dir.c_str(), aside.c_str()) != 0) throw_io("cannot move aside for removal", dir, errno);
        remove_tree(aside);
    }
}

// ---------------------------------------------------------------------------------------------

Checkpoint load_checkpoint(const fs::path& path_in) {
    fs::path path = path_in.lexically_normal();
    if (path.filename().empty() && path.has_parent_path()) path = path.parent_path();
    std::error_code ec;
    if (!fs::exists(path, ec)) {
        throw CheckpointError(fmt::format("no checkpoint at '{}': the path does not exist", path.string()));
    }
    if (!fs::is_directory(path, ec)) {
        throw CheckpointError(fmt::format("'{}' is not a directory; expected a step_<N> checkpoint directory, a "
                                          "checkpoints/ directory or a run directory",
                                          path.string()));
    }
    fs::path dir;
    if (fs::exists(path / kModelFile, ec) || fs::exists(path / kStateFile, ec)) {
        dir = path;
    } else {
        fs::path root;
        if (fs::exists(path / kLatest, ec)) {
            root = path;
        } else if (fs::exists(path / "checkpoints" / kLatest, ec)) {
            root = path / "checkpoints";
        } else {
            std::string hint;
            for (const fs::path& r : {path, path / "checkpoints"}) {
                auto steps = list_checkpoint_steps(r);
                if (!steps.empty()) {
                    hint = fmt::format("\nhint: '{}' has step directories but no 'latest' file; pass one of them, "
                                       "e.g. '{}'",
                                       r.string(), (r / step_dir_name(steps.back())).string());
                }
            }
            throw CheckpointError(fmt::format(
                "no checkpoint in '{}': looked for '{}' (a step_<N> directory), '{}' (a checkpoints directory) "
                "and '{}' (a run directory){}",
                path.string(), (path / kModelFile).string(), (path / kLatest).string(),
                (path / "checkpoints" / kLatest).string(), hint));
        }
        auto step = latest_step(root);
        dir = root / step_dir_name(*step);
        if (!fs::is_directory(dir, ec)) {
            throw CheckpointError(fmt::format("'{}' names {} but '{}' does not exist", (root / kLatest).string(),
                                              step_dir_name(*step), dir.string()));
        }
    }
    std::vector<std::string> missing;
    if (!fs::exists(dir / kModelFile, ec) && !fs::exists(dir / models::kHfIndexFile, ec))
        missing.push_back(kModelFile);
    if (!fs::exists(dir / kStateFile, ec)) missing.push_back(kStateFile);
    if (!missing.empty()) {
        throw CheckpointError(fmt::format("checkpoint '{}' is incomplete: missing {}", dir.string(),
                                          fmt::join(missing, ", ")));
    }

    Checkpoint ck{dir, 0, models::HfWeights::open(dir, /*verify=*/false), std::nullopt, {}};
    fs::path state_path = dir / kStateFile;
    ck.state = parse_state_json(read_file(state_path, kMaxStateBytes), state_path, &ck.checksummed);
    ck.step = ck.state["step"].get<std::int64_t>();
    auto named = parse_step_dir_name(dir.filename().string());
    if (named && *named != ck.step) {
        throw CheckpointError(fmt::format("checkpoint '{}': state.json says step {} but the directory is {}",
                                          dir.string(), ck.step, dir.filename().string()));
    }
    if (fs::exists(dir / kOptimizerFile, ec)) ck.optimizer = SafetensorsFile::open(dir / kOptimizerFile);
    for (const SafetensorsFile& f : ck.model.files()) verify_checkpoint_file(ck, f);
    if (ck.optimizer) verify_checkpoint_file(ck, *ck.optimizer);
    return ck;
}

nlohmann::json parse_state_json(const std::string& text, const fs::path& file, bool* checksummed) {
    // Bounded (core/json_parse.h): a checkpoint may come from elsewhere; JsonParseError is a FormatError.
    nlohmann::json state = parse_json(text, "'" + file.string() + "'");
    *checksummed = state.is_object() && take_state_checksum(state, file);
    const auto step = state.is_object() ? state.find("step") : state.end();
    if (!state.is_object() || step == state.end() || !step->is_number_integer() ||
        (step->is_number_unsigned() && step->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) ||
        step->get<std::int64_t>() < 0) {
        throw FormatError(fmt::format("'{}': field \"step\" must be an integer >= 0 in a JSON object{}", file.string(),
                                      !state.is_object()   ? fmt::format(", found a JSON {}", state.type_name())
                                      : step == state.end() ? std::string(", and it is missing")
                                      : step->is_primitive() ? fmt::format(", found {}", step->dump().substr(0, 40))
                                                             : fmt::format(", found a JSON {}", step->type_name())));
    }
    return state;
}

void verify_checkpoint_file(const Checkpoint& ck, const SafetensorsFile& file) {
    verify_tensors(file, ck.checksummed ? Checksums::kRequired : Checksums::kIfPresent);
}

void check_tensors(const SafetensorsFile& file, const std::vector<TensorSpec>& expected, std::string_view what,
                   bool allow_float_conversion) {
    auto diffs = diff_tensors(file, expected, allow_float_conversion);
    if (diffs.empty()) return;
    throw CheckpointError(fmt::format("{} tensors in '{}' do not match ({} difference{}):\n  {}", what, file.path(),
                                      diffs.size(), diffs.size() == 1 ? "" : "s", fmt::join(diffs, "\n  ")));
}

}  // namespace llmt::train
