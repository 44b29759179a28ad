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
// reads the file as it is now. Override lists come from clients, so the cache is bounded by bytes:
// at most kMaxBytes for all presets (the oldest variants leave first), a variant over kMaxBytes / 16
// is not kept, and a refused override list is never kept (it is parsed again, as without a cache):
// a sweep of distinct overrides costs one parse each and a bounded amount of memory.
class PresetCache {
public:
    static constexpr size_t kMaxBytes = 16u << 20;

    explicit PresetCache(std::filesystem::path presets_dir);

    const std::filesystem::path& dir() const { return dir_; }

    // The preset `name` (presets_dir/<name>.yaml) loaded with `sets` ("key.path=value", as --set).
    // nullopt when there is no such file. Throws config::ConfigValidationError (the same issues as
    // load_config_string) and IoError/InputError when the file cannot be read.
    std::optional<std::shared_ptr<const LoadedPreset>> load(const std::string& name,
                                                            const std::vector<std::string>& sets);

    // Lookups answered from the cache and lookups that parsed, since the start (for tests and /metrics).
    uint64_t hits() const;
    uint64_t misses() const;
    // What the cache holds now, by its own accounting (override lists, configs, preset texts).
    size_t bytes() const;

private:
    // The config a preset loads to with one override list, its charge and when it was made.
    struct Variant {
        std::shared_ptr<const LoadedPreset> loaded;
        size_t bytes = 0;
        uint64_t seq = 0;
    };
    struct Entry {
        FileVersion version;
        std::string text;
        std::map<std::vector<std::string>, Variant> variants;
    };

    std::filesystem::path dir_;
    mutable std::mutex mu_;
    // Drops the oldest variants (any preset) until `incoming` more bytes fit. Called under mu_.
    void make_room(size_t incoming);
    void drop_entry(std::map<std::string, Entry>::iterator it);  // under mu_

    std::map<std::string, Entry> entries_;  // by preset name
    size_t bytes_ = 0;                      // texts and variants of entries_
    uint64_t hits_ = 0, misses_ = 0, seq_ = 0;
};

}  // namespace llmt::server
