// Loads a YAML config strictly: unknown keys, wrong types, out-of-range values and contradicting keys
// are all collected and thrown together as one ConfigValidationError, each naming the key path, the
// file, line and column, what was expected and what was found.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "core/error.h"

namespace llmt::config {

// One problem found in a config.
struct ConfigIssue {
    std::string key;      // full key path ("trainer.lr"), empty for whole-file problems
    std::string where;    // "configs/x.yaml:12:3", or "--set trainer.lr=abc"
    std::string message;  // what was expected and what was found
};

class ConfigValidationError : public ConfigError {
public:
    ConfigValidationError(std::string source, std::vector<ConfigIssue> issues);
    const std::vector<ConfigIssue>& issues() const { return issues_; }
    const std::string& source() const { return source_; }

private:
    std::string source_;
    std::vector<ConfigIssue> issues_;
};

// Config files larger than this are refused before they are parsed.
inline constexpr std::size_t kMaxConfigBytes = 1 << 20;

// What the config is for: a training run (every key's requirements), or only a model to run (`generate
// --model DIR`: the data section describes no data and its requirements are not checked).
enum class ConfigUse { kTraining, kModelOnly };

// `sets` are "key.path=value" strings (the CLI's --set); values are YAML scalars or flow lists.
// Throws ConfigValidationError (all issues), IoError when the file cannot be read.
Config load_config_file(const std::filesystem::path& path, const std::vector<std::string>& sets = {});
Config load_config_string(std::string_view yaml, const std::string& source_name,
                          const std::vector<std::string>& sets = {}, ConfigUse use = ConfigUse::kTraining);

// After a caller changed model keys in cfg.resolved (models/hf_config.h applying a Hugging Face
// config.json): derives the null model keys, re-runs the model section's checks (divisibility, the
// per-architecture refusals) and refreshes cfg.model from cfg.resolved. `origins` names where changed
// keys came from ("DIR/config.json: num_hidden_layers"), cfg.written where the user's did.
// Throws ConfigValidationError (every issue).
void recheck_model_section(Config& cfg, const std::map<std::string, std::string>& origins);

}  // namespace llmt::config
