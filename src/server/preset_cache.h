// Presets as a submission loads them, each parse and validation done once: for every preset file the
// validated config per list of overrides (and the YAML the job re-reads), kept until the file changes.
// A submission's config is then a lookup instead of a YAML parse (docs/server.md "Submission path").
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/file_version.h"
#include "config/config.h"
#include "config/loader.h"

namespace llmt::server {

// What a preset with a list of overrides loads to.
struct LoadedPreset {
    config::Config config;
    std::string config_yaml;  // config::to_yaml_written(config)
};

// Thread-safe. Each lookup stats the preset file; a change of its device, inode, size, mtime or ctime
// (an edit in place, a rename over it, a touch) drops what was cached for it, so the next submission
// reads the file as it is now. Per preset at most kMaxVariants override lists are kept (past it the
// preset's list starts over): a sweep of distinct overrides costs one parse each, as without a cache.
class PresetCache {
public:
    static constexpr size_t kMaxVariants = 256;

    explicit PresetCache(std::filesystem::path presets_dir);

    const std::filesystem::path& dir() const { return dir_; }

    // The preset `name` (presets_dir/<name>.yaml) loaded with `sets` ("key.path=value", as --set).
    // nullopt when there is no such file. Throws config::ConfigValidationError (the same issues as
    // load_config_string, cached too: a refused override list is refused again without a parse) and
    // IoError/InputError when the file cannot be read.
    std::optional<std::shared_ptr<const LoadedPreset>> load(const std::string& name,
                                                            const std::vector<std::string>& sets);

    // Lookups answered from the cache and lookups that parsed, since the start (for tests and /metrics).
    uint64_t hits() const;
    uint64_t misses() const;

private:
    // What identifies one version of a file without reading it.
    // One outcome of loading the preset with one override list: a config or the issues it has.
    struct Variant {
        std::shared_ptr<const LoadedPreset> loaded;
        std::optional<config::ConfigValidationError> refused;
    };
    struct Entry {
        FileVersion version;
        std::string text;
        std::map<std::vector<std::string>, Variant> variants;
    };

    std::filesystem::path dir_;
    mutable std::mutex mu_;
    std::map<std::string, Entry> entries_;  // by preset name
    uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace llmt::server
