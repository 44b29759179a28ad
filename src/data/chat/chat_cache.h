// `data.source: chat`: chat JSONL files tokenized once into a cache directory and split into train and
// validation examples (docs/formats/chat_jsonl.md, "Cache"). The cache is keyed by the content of every
// input file, the tokenizer file and the chat template file, so a second run reads it and an edited input
// builds a new one.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/chat/chat_dataset.h"

namespace llmt::data {

struct ChatDataOptions {
    std::vector<std::string>
        paths;  // data.paths: JSONL files or directories, or dataset directories (chat_input_files)
    // data.tokenizer: a model directory holding tokenizer.json and tokenizer_config.json (the chat
    // template), or a tokenizer.json with tokenizer_config.json beside it.
    std::string tokenizer;
    std::filesystem::path cache_dir;  // data.cache_dir; the cache is cache_dir/chat-<24 hex digits of the key>
    double val_fraction = 0.0;        // data.val_fraction: expected share of examples held out
    uint64_t seed = 0;                // run.seed: which examples those are (prepare.h's is_val_document)
    std::string revision = "main";    // data.revision: the snapshot of the hub cache folders among paths
};

struct ChatData {
    std::shared_ptr<const ChatDataset> examples;
    // Example indices of each split, in input order: example i goes to val when is_val_document(i, seed,
    // val_fraction); when that picks none but val_fraction > 0, the last example does.
    std::vector<uint32_t> train, val;
    std::string key;            // sha256 hex of the cache key
    std::filesystem::path dir;  // the cache directory (examples.bin, manifest.json)
    bool reused = false;        // true: an earlier run's cache was read, nothing tokenized
    uint32_t pad_id = 0;        // the tokenizer's end-of-text id (<|end_of_text|>): fills unused row slots
    std::size_t vocab_size = 0;  // the tokenizer's
    nlohmann::json manifest;    // what manifest.json holds: key, inputs, tokenizer, template, counts
};

// The tokenizer_config.json that holds the chat template for `tokenizer_spec`. Throws InputError when the
// spec names neither a directory nor a tokenizer.json.
std::filesystem::path chat_template_file(const std::string& tokenizer_spec);

// Reads or builds the cache, then splits. Not safe for two processes building the same key at once: in a
// distributed job call it on one rank first, barrier, then on the others (they read the cache).
// Throws FormatError naming file:line and field for a malformed record (chat_records.h), InputError for
// missing inputs, a tokenizer without a chat template, no examples or an empty train split, IoError.
ChatData open_chat_data(const ChatDataOptions& opts);

}  // namespace llmt::data
