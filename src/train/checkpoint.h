// Checkpoint directories (docs/design.md §3, docs/formats/checkpoint.md): checkpoints/step_<N>/ holding
// model.safetensors, optimizer.safetensors and state.json, written into checkpoints/.tmp-step_<N>-<pid>/,
// fsynced and renamed into place; then checkpoints/latest (text "step_<N>") is replaced atomically.
// A crash at any point leaves the previous checkpoint and `latest` intact.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/safetensors.h"
#include "models/hf_weights.h"

namespace llmt::train {

inline constexpr const char* kModelFile = "model.safetensors";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";
inline constexpr const char* kStateFile = "state.json";
// state.json's own checksum: "crc32c:%08x" of the object without this key, serialised compactly
// (nlohmann::json::dump(), keys sorted), so reformatting the file keeps it valid and changing a value
// does not. Its presence marks a checkpoint whose every tensor carries a checksum.
inline constexpr const char* kStateChecksumKey = "checksum";

struct SaveOptions {
    // Keep the newest `keep_last` step_N directories (0 = keep all). The ones `latest` and `best`
    // name are never removed.
    int keep_last = 0;
    // Also point checkpoints/best at this step (before pruning, so it is kept).
    bool mark_best = false;
    // Test hook, called with the name of each stage ("after:model.safetensors", "before_rename",
    // "before_latest", "before_prune"); throwing or exiting there simulates a crash at that point.
    std::function<void(std::string_view stage)> fault_hook;
};

// Writes one checkpoint directory. Not thread-safe; one writer per checkpoints/ directory at a time
// (rank 0). The constructor removes stale .tmp-* / .del-* directories that a crashed save left and
// creates a fresh temp dir; the destructor removes the temp dir unless commit() succeeded, so an
// exception anywhere leaves no trace but the previous checkpoints.
class CheckpointWriter {
public:
    // Throws IoError when `root` cannot be created or written, InputError for step < 0.
    CheckpointWriter(std::filesystem::path root, std::int64_t step, SaveOptions opts = {});
    ~CheckpointWriter();
    CheckpointWriter(const CheckpointWriter&) = delete;
    CheckpointWriter& operator=(const CheckpointWriter&) = delete;

    // Files of the checkpoint (fsynced each). `filename` is a plain name, no directories.
    void write_tensors(const std::string& filename, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
    void write_json(const std::string& filename, const nlohmann::json& value);
    // state.json with its checksum (kStateChecksumKey) added; `state` must be an object.
    void write_state(const nlohmann::json& state);

    const std::filesystem::path& temp_dir() const { return tmp_; }

    // Requires the model's weights (model.safetensors, or the shards' model.safetensors.index.json that ZeRO-3
    // writes: train/zero3_state.h) and state.json to have been written. fsyncs the temp dir, renames
    // it to step_<N> (atomically exchanging an existing step_<N>), fsyncs root, replaces `latest`,
    // updates `best` if asked, prunes. Returns the final directory.
    std::filesystem::path commit();

private:
    void hook(std::string_view stage) const;

    std::filesystem::path root_, tmp_;
    std::int64_t step_;
    SaveOptions opts_;
    bool committed_ = false;
};

// The usual save: model.safetensors, optimizer.safetensors (skipped when `optimizer` is empty) and
// state.json (with "step" set to `step`). Returns checkpoints/step_<N>.
std::filesystem::path save_checkpoint(const std::filesystem::path& root, std::int64_t step,
                                      const std::vector<TensorRef>& model, const std::vector<TensorRef>& optimizer,
                                      nlohmann::json state, const SaveOptions& opts = {},
                                      const std::map<std::string, std::string>& model_metadata = {{"format", "pt"}},
                                      const std::map<std::string, std::string>& optimizer_metadata = {});

// "step_<N>" <-> N. parse returns nullopt for anything else (so stray files never count).
std::string step_dir_name(std::int64_t step);
std::optional<std::int64_t> parse_step_dir_name(std::string_view name);

// Steps of the complete step_<N> directories under root, ascending (empty when root is absent).
std::vector<std::int64_t> list_checkpoint_steps(const std::filesystem::path& root);
// The step `latest` / `best` names, nullopt when the file is absent. Throws CheckpointError when
// the file exists but does not hold "step_<N>".
std::optional<std::int64_t> latest_step(const std::filesystem::path& root);
std::optional<std::int64_t> best_step(const std::filesystem::path& root);
// Points root/best at step_<step>, which must exist (CheckpointError otherwise). Atomic.
void set_best(const std::filesystem::path& root, std::int64_t step);
// Removes step dirs beyond the newest keep_last, never the latest or best one. keep_last <= 0: none.
void prune_checkpoints(const std::filesystem::path& root, int keep_last);

// A loaded checkpoint: files mapped and validated, state parsed.
struct Checkpoint {
    std::filesystem::path dir;
    std::int64_t step = 0;
    models::HfWeights model;  // model.safetensors, or ZeRO-3's shards listed by model.safetensors.index.json
    std::optional<SafetensorsFile> optimizer;  // absent when the checkpoint has none
    nlohmann::json state;                      // without kStateChecksumKey
    // state.json had a checksum, so every tensor file of the checkpoint must carry per-tensor
    // checksums. False for a state.json without one (an older checkpoint): loaded, not verified.
    bool checksummed = false;
};

// The model's weights are model.safetensors or, when the directory has model.safetensors.index.json, the
// shards it lists (ZeRO-3), each verified like model.safetensors. `path` is a step_<N> directory, a checkpoints/
// directory (follows `latest`) or a run directory (follows checkpoints/latest). Throws CheckpointError naming what was
// looked for when nothing is there, FormatError for a corrupt safetensors or state.json, CheckpointError when
// state.json's step disagrees with the directory name. Verifies state.json's checksum and every tensor of
// model.safetensors and optimizer.safetensors (verify_checkpoint_file): FormatError naming the file and
// the tensor on a checksum mismatch, a missing checksum (when state.json has one) or a NaN/infinity.
Checkpoint load_checkpoint(const std::filesystem::path& path);

// state.json's text -> the object without its checksum (verified when present: *checksummed is then
// set). Throws FormatError naming `file` for invalid JSON, a non-object, a missing or non-integer or
// negative "step", or a checksum that is malformed or does not match.
nlohmann::json parse_state_json(const std::string& text, const std::filesystem::path& file, bool* checksummed);

// Checks another tensor file of `ck` (a ZeRO-1 optimizer shard) as load_checkpoint checks its own.
void verify_checkpoint_file(const Checkpoint& ck, const SafetensorsFile& file);

// Throws CheckpointError listing every difference between `file` and `expected` (see diff_tensors);
// `what` names the role in the message ("model", "optimizer").
void check_tensors(const SafetensorsFile& file, const std::vector<TensorSpec>& expected, std::string_view what,
                   bool allow_float_conversion = false);

}  // namespace llmt::train
