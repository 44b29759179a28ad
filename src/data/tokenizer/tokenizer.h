// Byte-level BPE tokenizer: token-for-token identical to tiktoken's `gpt2` (r50k_base) encoding, and to
// Hugging Face `tokenizers` on a tokenizer.json of Llama 3's layout (Split regex + ByteLevel, merge-list
// priorities, ignore_merges, added tokens). Pre-tokenization is GPT-2's or Llama 3's regex written by
// hand (tokenizer_pretokenize.h); merges go lowest rank first, leftmost on ties (tiktoken: the rank is the
// id of the merged token; Hugging Face: the merge's index). Invalid UTF-8 is encoded byte-wise, never rejected:
// each invalid byte is treated as a character of class "other" (like punctuation) by the pre-tokenizer,
// and byte-level BPE encodes it losslessly, so decode(encode(b)) == b for every byte string b.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmt::data {

struct TokenizerImpl;

// Thread safety: const methods may be called from many threads at once. Copies share the loaded
// vocabulary (copying is cheap). Each thread keeps a small cache of recently encoded words.
class Tokenizer {
public:
    // spec: "gpt2" (looks for gpt2.tiktoken in $LLMTRAIN_HOME/tokenizers/, then
    // <prefix of the running binary>/share/llmtrain/tokenizers/, then the checkout's data/tokenizers/
    // found relative to the binary; the error lists every place looked; the file's sha256 must be the
    // published one), or a path to a .tiktoken file, a Hugging Face tokenizer.json (BPE model with the
    // ByteLevel pre-tokenizer, or a Split with Llama 3's or GPT-2's pattern + ByteLevel), a directory
    // holding tokenizer.json (a model directory), or a directory/prefix holding GPT-2's vocab.json +
    // merges.txt.
    // Throws InputError (missing file) / FormatError (file and line or key of the problem), IoError.
    static Tokenizer load(const std::string& spec);

    // tiktoken encode_ordinary: "<|endoftext|>" in the text is encoded as ordinary text (Hugging Face:
    // encode_special_tokens = True; added tokens that are not special are still recognised).
    std::vector<uint32_t> encode_ordinary(std::string_view text) const;
    // allow_special: special tokens ("<|endoftext|>" -> 50256) are recognised, leftmost-longest; else the
    // same as encode_ordinary. Never adds the post-processor's tokens (prefix_tokens()).
    std::vector<uint32_t> encode(std::string_view text, bool allow_special) const;
    // Appends to `out` (no allocation of a new vector per document).
    void encode_into(std::string_view text, bool allow_special, std::vector<uint32_t>& out) const;
    // Concatenated token bytes. Throws InputError on an id that is not in the vocabulary.
    std::string decode(std::span<const uint32_t> ids) const;
    // Bytes of one token (special tokens: their text). Throws InputError on an unknown id.
    std::string_view token_bytes(uint32_t id) const;

    // The leftmost-longest added token at or after `from` (special ones only when allow_special): its
    // offset, with *id and *len set; npos when none.
    std::size_t find_added_token(std::string_view text, std::size_t from, bool allow_special, uint32_t* id,
                                 std::size_t* len) const;
    // Id of the token whose text (added tokens) or bytes (mergeable tokens) is `text`; 0xFFFFFFFF if none.
    uint32_t token_id(std::string_view text) const;

    // The end-of-text token: <|endoftext|> (50256 for gpt2), Llama 3's <|end_of_text|> (128001).
    uint32_t eot_token() const;
    std::size_t vocab_size() const;    // 50257 for gpt2 (largest id + 1)
    const std::string& source_sha256() const;  // sha256 hex of the file loaded (vocab.json + merges.txt:
                                               // of the two files' bytes concatenated)
    const std::string& source_path() const;    // the file (or vocab.json) it was loaded from
    // Added tokens (text, id), in file order; gpt2: {"<|endoftext|>", 50256}.
    const std::vector<std::pair<std::string, uint32_t>>& special_tokens() const;
    // What Hugging Face's post-processor (TemplateProcessing) puts before / after one sequence with
    // add_special_tokens=True (Llama 3.1: {<|begin_of_text|>} / {}); empty for tiktoken files.
    const std::vector<uint32_t>& prefix_tokens() const;
    const std::vector<uint32_t>& suffix_tokens() const;

    explicit Tokenizer(std::shared_ptr<const TokenizerImpl> impl);

private:
    std::shared_ptr<const TokenizerImpl> impl_;
};

// Encodes many documents on `threads` threads (0 = hardware concurrency), order preserved.
std::vector<std::vector<uint32_t>> encode_batch(const Tokenizer& tok, const std::vector<std::string_view>& docs,
                                                bool allow_special, int threads);

// Encodes one large text on `threads` threads (0 = hardware concurrency) with the same result as
// tok.encode(text, allow_special). The text is cut only at points where GPT-2's pre-tokenizer is known
// to start a new piece whatever follows (a '\n' between two printable ASCII characters), into chunks of
// at least `min_chunk_bytes`; a text without such points is encoded on one thread.
std::vector<uint32_t> encode_parallel(const Tokenizer& tok, std::string_view text, bool allow_special, int threads,
                                      std::size_t min_chunk_bytes = std::size_t{256} << 10);

}  // namespace llmt::data
