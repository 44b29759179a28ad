// PresetCache: stat, compare, parse on a miss outside the lock; see preset_cache.h.
#include "server/preset_cache.h"


#include "config/emit.h"
#include "core/fs.h"

namespace llmt::server {

namespace fs = std::filesystem;

PresetCache::PresetCache(fs::path presets_dir) : dir_(std::move(presets_dir)) {}

std::optional<std::shared_ptr<const LoadedPreset>> PresetCache::load(const std::string& name,
                                                                     const std::vector<std::string>& sets) {
    const fs::path file = dir_ / (name + ".yaml");
    // The version is taken before the text is read: a change in between is seen by the next lookup.
    const auto version = file_version(file);
    std::string text;
    {
        std::lock_guard lock(mu_);
        if (!version) {
            entries_.erase(name);
            return std::nullopt;
        }
        auto it = entries_.find(name);
        if (it != entries_.end() && it->second.version == *version) {
            if (auto v = it->second.variants.find(sets); v != it->second.variants.end()) {
                ++hits_;
                if (v->second.refused) throw *v->second.refused;
                return v->second.loaded;
            }
            text = it->second.text;
        }
        ++misses_;
    }
    if (text.empty()) text = read_file(file, config::kMaxConfigBytes);
    // Parsed and validated without the lock: other presets and other override lists go on meanwhile.
    Variant made;
    try {
        auto loaded = std::make_shared<LoadedPreset>();
        loaded->config = config::load_config_string(text, name + ".yaml", sets);
        loaded->config_yaml = config::to_yaml_written(loaded->config);
        made.loaded = std::move(loaded);
    } catch (const config::ConfigValidationError& e) {
        made.refused = e;
    }
    {
        std::lock_guard lock(mu_);
        Entry& e = entries_[name];
        if (!(e.version == *version) || e.text != text) {
            e.version = *version;
            e.text = text;
            e.variants.clear();
        }
        if (e.variants.size() >= kMaxVariants) e.variants.clear();
        e.variants[sets] = made;
    }
    if (made.refused) throw *made.refused;
    return made.loaded;
}

uint64_t PresetCache::hits() const {
    std::lock_guard lock(mu_);
    return hits_;
}

uint64_t PresetCache::misses() const {
    std::lock_guard lock(mu_);
    return misses_;
}

}  // namespace llmt::server
