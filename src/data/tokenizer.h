// GPT-2 byte-level BPE tokenizer, token-for-token identical to tiktoken's `gpt2` (r50k_base) encoding.
// Pre-tokenization is GPT-2's regex written by hand (tokenizer_pretokenize.h); merges follow tiktoken's
// rank order (lowest rank first, leftmost on ties). Invalid UTF-8 is encoded byte-wise, never rejected:
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
    // ByteLevel pre-tokenizer), or a directory/prefix holding GPT-2's vocab.json + merges.txt.
    // Throws InputError (missing file) / FormatError (file and line or key of the problem), IoError.
    static Tokenizer load(const std::string& spec);

    // tiktoken encode_ordinary: "<|endoftext|>" in the text is encoded as ordinary text.
    std::vector<uint32_t> encode_ordinary(std::string_view text) const;
    // allow_special: special tokens ("<|endoftext|>" -> 50256) are recognised; else same as encode_ordinary.
    std::vector<uint32_t> encode(std::string_view text, bool allow_special) const;
    // Appends to `out` (no allocation of a new vector per document).
    void encode_into(std::string_view text, bool allow_special, std::vector<uint32_t>& out) const;
    // Concatenated token bytes. Throws InputError on an id that is not in the vocabulary.
    std::string decode(std::span<const uint32_t> ids) const;
    // Bytes of one token (special tokens: their text). Throws InputError on an unknown id.
    std::string_view token_bytes(uint32_t id) const;

    uint32_t eot_token() const;        // 50256 for gpt2
    std::size_t vocab_size() const;    // 50257 for gpt2 (largest id + 1)
    const std::string& source_sha256() const;  // sha256 hex of the file loaded (vocab.json + merges.txt:
                                               // of the two files' bytes concatenated)
    const std::string& source_path() const;    // the file (or vocab.json) it was loaded from
    // Special tokens (text, id) that encode(..., true) recognises; gpt2: {"<|endoftext|>", 50256}.
    const std::vector<std::pair<std::string, uint32_t>>& special_tokens() const;

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
