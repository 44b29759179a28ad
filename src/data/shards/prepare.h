// `llmtrain data prepare`: corpus files -> tokenized llm.c shards + manifest.json, with a
// deterministic train/val split by document (docs/formats/shards.md, docs/data.md).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/shards/corpus.h"

namespace llmt::data {

struct PrepareOptions {
    std::vector<std::string> inputs;  // files and/or directories (see list_input_files)
    CorpusOptions corpus;
    std::string tokenizer = "gpt2";  // Tokenizer::load spec
    std::filesystem::path out_dir;
    double val_fraction = 0.005;  // in [0, 1): expected share of documents in val
    uint64_t shard_tokens = 100'000'000;
    int threads = 0;  // encoding threads, 0 = all cores
    uint64_t seed = 0;
    bool progress = true;  // report on stderr (bar on a terminal, plain lines otherwise)
};

// True when document number `doc_index` (0-based, counted over all input files in order) goes to
// the validation split: the top 53 bits of a hash of (seed, doc_index) read as a fraction in [0, 1)
// fall below val_fraction. Depends only on these three values, so a split is reproducible and stable
// when documents are appended at the end.
bool is_val_document(uint64_t doc_index, uint64_t seed, double val_fraction);

// Runs the whole job: removes earlier `train_NNNNNN.bin`, `val_NNNNNN.bin` and `manifest.json` from
// out_dir (so a shard glob never picks up stale shards), writes the shards, then manifest.json
// atomically, and returns the manifest. When val_fraction > 0 but the hash picked no document, the
// document with the smallest hash goes to val (this needs a second pass over the inputs, which only
// happens for corpora of a few hundred documents or fewer). Throws InputError for bad options, fewer
// than 2 documents with val_fraction > 0, or no documents; errors from the readers and tokenizer.
nlohmann::ordered_json prepare_shards(const PrepareOptions& opts);

}  // namespace llmt::data
