// Shards for a text/JSONL training source, prepared once into a cache directory and reused while
// the inputs and options are unchanged (config `data.source: text|jsonl` with `data.cache_dir`).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "data/shards/prepare.h"

namespace llmt::data {

struct CachedShards {
    std::filesystem::path dir;  // holds train_*.bin, val_*.bin, manifest.json
    bool reused = false;        // true: an earlier run's shards were found and nothing was written
    nlohmann::json manifest;
};

// The cache key: sha256 of a canonical JSON of the options that change the shards (format,
// text_field, doc_separator, tokenizer spec, val_fraction, seed, shard_tokens) and, for every input
// file (expanded as list_input_files does) and a tokenizer given as a path, its path, size and
// modification time. Not part of it: out_dir, threads, progress (they do not change the bytes).
std::string prepare_cache_key(const PrepareOptions& opts);

// Returns `cache_root/shards-<first 24 hex digits of the key>`, running prepare_shards into it unless
// its manifest.json already exists (prepare_shards writes the manifest last, so its presence means a
// complete directory). Not safe for two processes preparing the same key at once: in a distributed
// job call it on one process and let the others wait (barrier), then call it there to get the dir.
// Throws what prepare_shards throws.
CachedShards prepare_cached(PrepareOptions opts, const std::filesystem::path& cache_root);

}  // namespace llmt::data
