// A run's tokenizer as the files of a Hugging Face model directory, so that AutoTokenizer.from_pretrained
// reads an export, a merge or a checkpoint directory as it is: tokenizer.json + tokenizer_config.json (with
// its chat template) for tokenizer.json tokenizers, vocab.json + merges.txt + tokenizer_config.json for
// GPT-2's byte-level BPE (a .tiktoken vocabulary's merges recovered from its ranks), and the special ids
// the model files record (bos, eos, pad). docs/formats/hf_directories.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace llmt::data {

class Tokenizer;

// What a model directory's tokenizer files say about its special tokens, as ids of the tokenizer.
struct HfSpecialIds {
    std::vector<int64_t> bos_token_id;  // tokenizer_config.json's bos_token, else the post-processor's prefix
    std::vector<int64_t> eos_token_id;  // tokenizer_config.json's eos_token, else the end-of-text token
    std::vector<int64_t> pad_token_id;  // tokenizer_config.json's pad_token, else the eos id
    // eos plus the chat template's end of turn (<|eot_id|>) when the template is one we know: the ids
    // generation_config.json lists, as Llama 3 Instruct's does.
    std::vector<int64_t> generation_eos_token_id;
};

// The files, held until written. Not thread-safe to write() from several threads into one directory.
class HfTokenizerFiles {
public:
    // `spec` as data::Tokenizer::load takes it ("gpt2", a .tiktoken file, a tokenizer.json, a directory with
    // tokenizer.json or vocab.json + merges.txt). `model_max_length` goes into a tokenizer_config.json we
    // write (the model's context). Throws as Tokenizer::load, and FormatError for a .tiktoken vocabulary whose
    // ranks are not a byte-level BPE's (no merge list gives them).
    static HfTokenizerFiles from_spec(const std::string& spec, int model_max_length);

    // Writes every file into `dir` (an existing directory; each file written atomically). Throws IoError.
    void write(const std::filesystem::path& dir) const;
    // The file names, in the order written.
    std::vector<std::string> names() const;
    const HfSpecialIds& ids() const { return ids_; }
    std::size_t vocab_size() const { return vocab_size_; }
    const std::string& spec() const { return spec_; }

private:
    std::string spec_;
    std::size_t vocab_size_ = 0;
    std::vector<std::pair<std::string, std::filesystem::path>> copies_;  // name in dir, file to copy
    std::vector<std::pair<std::string, std::string>> contents_;          // name in dir, text to write
    HfSpecialIds ids_;
};

// True when `dir` holds a tokenizer a model directory can carry: tokenizer.json, or vocab.json and merges.txt.
bool has_hf_tokenizer_files(const std::filesystem::path& dir);

// GPT-2's vocab.json and merges.txt for a byte-level BPE tokenizer loaded from a .tiktoken file (ids are
// ranks; special tokens keep their ids in vocab.json). Each merge is recovered by running BPE over the
// token's bytes with the lower ranks only, which ends in exactly the two parts the token was merged from.
// Throws FormatError when a token does not split so (not a BPE vocabulary).
std::pair<std::string, std::string> gpt2_vocab_and_merges(const Tokenizer& tok);

}  // namespace llmt::data
