// PresetCache: stat, compare, parse on a miss outside the lock; see preset_cache.h.
#include "server/estimate/preset_cache.h"

#include "config/emit.h"
#include "core/fs.h"

namespace llmt::server {

namespace fs = std::filesystem;

namespace {

// What a variant is charged: its key (the override strings), a fixed part for the Config's own fields and
// its config four times: the YAML kept, and the Config's three forms of the same values (the resolved tree,
// the keys as written, the typed fields), each about as large as the YAML. A long override value is in all
// four, so counting fewer let the cache hold more than its bound says.
size_t variant_bytes(const std::vector<std::string>& sets, const LoadedPreset& loaded) {
    size_t n = 16u << 10;
    for (const auto& s : sets) n += s.size() + sizeof(std::string);
    return n + 4 * loaded.config_yaml.size();
}

}  // namespace

PresetCache::PresetCache(fs::path presets_dir) : dir_(std::move(presets_dir)) {}

void PresetCache::drop_entry(std::map<std::string, Entry>::iterator it) {
    bytes_ -= it->second.text.size();
    for (const auto& [sets, v] : it->second.variants) bytes_ -= v.bytes;
    entries_.erase(it);
}

void PresetCache::make_room(size_t incoming) {
    while (bytes_ + incoming > kMaxBytes) {
        Entry* owner = nullptr;
        std::map<std::vector<std::string>, Variant>::iterator oldest;
        for (auto& [name, e] : entries_)
            for (auto v = e.variants.begin(); v != e.variants.end(); ++v)
                if (!owner || v->second.seq < oldest->second.seq) {
                    owner = &e;
                    oldest = v;
                }
        if (!owner) return;  // only preset texts left: each under config::kMaxConfigBytes
        bytes_ -= oldest->second.bytes;
        owner->variants.erase(oldest);
    }
}

std::optional<std::shared_ptr<const LoadedPreset>> PresetCache::load(const std::string& name,
                                                                     const std::vector<std::string>& sets) {
    const fs::path file = dir_ / (name + ".yaml");
    // The version is taken before the text is read: a change in between is seen by the next lookup.
    const auto version = file_version(file);
    std::string text;
    {
        std::lock_guard lock(mu_);
        auto it = entries_.find(name);
        if (!version) {
            if (it != entries_.end()) drop_entry(it);
            return std::nullopt;
        }
        if (it != entries_.end() && it->second.version == *version) {
            if (auto v = it->second.variants.find(sets); v != it->second.variants.end()) {
                ++hits_;
                return v->second.loaded;
            }
            text = it->second.text;
        }
        ++misses_;
    }
    if (text.empty()) text = read_file(file, config::kMaxConfigBytes);
    // Parsed and validated without the lock: other presets and other override lists go on meanwhile.
    // A refusal throws from here, so it is never kept.
    auto loaded = std::make_shared<LoadedPreset>();
    loaded->config = config::load_config_string(text, name + ".yaml", sets);
    loaded->config_yaml = config::to_yaml_written(loaded->config);
    Variant made{loaded, variant_bytes(sets, *loaded), 0};
    {
        std::lock_guard lock(mu_);
        auto it = entries_.find(name);
        if (it != entries_.end() && (!(it->second.version == *version) || it->second.text != text)) {
            drop_entry(it);
            it = entries_.end();
        }
        if (it == entries_.end()) {
            it = entries_.emplace(name, Entry{*version, text, {}}).first;
            bytes_ += text.size();
        }
        if (made.bytes <= kMaxBytes / 16 && !it->second.variants.count(sets)) {
            make_room(made.bytes);
            made.seq = ++seq_;
            bytes_ += made.bytes;
            it->second.variants.emplace(sets, std::move(made));
        }
    }
    return loaded;
}

uint64_t PresetCache::hits() const {
    std::lock_guard lock(mu_);
    return hits_;
}

size_t PresetCache::bytes() const {
    std::lock_guard lock(mu_);
    return bytes_;
}

uint64_t PresetCache::misses() const {
    std::lock_guard lock(mu_);
    return misses_;
}

}  // namespace llmt::server
