// What ends generation, where a model directory's tokenizer files are, and how text streams out: shared by
// `generate` and `chat`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/tokenizer/tokenizer.h"

namespace llmt::cli {

// The directory a --tokenizer spec's files are in: the spec itself when it is a directory (a model
// directory), the file's directory for a tokenizer.json; empty for "gpt2" and other files.
std::filesystem::path tokenizer_directory(const std::string& spec);

// The tokenizer for text in and out of a model: `tokenizer` (--tokenizer) when given; else a Hugging Face
// model directory's own files (`model_dir`: --model DIR, empty for a checkpoint of ours); else the
// checkpoint's run's (train/hf_model_files.h run_tokenizer_spec). A model directory without tokenizer files
// is a UsageError naming it and the ways out (--tokenizer, --prompt-ids): text never goes through a
// tokenizer the model was not trained with.
std::string text_tokenizer(const std::string& command, const std::string& tokenizer, const std::string& model_dir,
                           const config::Config& cfg);

// True when `path` is a run of ours (it has checkpoints/), a checkpoints/ directory (latest) or a step
// directory (state.json), rather than a Hugging Face model directory.
bool is_checkpoint_path(const std::string& path);

// Ids that stop sampling: the tokenizer's end-of-text token, then every eos_token_id of
// DIR/generation_config.json (an int or a list; Llama 3 Instruct: <|end_of_text|> and <|eot_id|>) when
// `dir` has one, then `extra`. Throws FormatError naming the file and field for a malformed file or an id
// outside the vocabulary.
std::vector<uint32_t> generation_stop_ids(const data::Tokenizer& tok, const std::filesystem::path& dir,
                                          const std::vector<uint32_t>& extra = {});

// Writes `s` to stdout and flushes, so each token appears as soon as it is sampled (nothing for "").
void write_out(const std::string& s);

// "<|eot_id|>" for one id, "<|eot_id|> (128009), <|end_of_text|> (128001)" for the list.
std::string describe_ids(const data::Tokenizer& tok, const std::vector<uint32_t>& ids);

}  // namespace llmt::cli
