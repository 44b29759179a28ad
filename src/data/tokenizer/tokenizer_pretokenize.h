// Pre-tokenizers, hand-written. GPT-2's: the pieces tiktoken's regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// finds (leftmost-first alternation, backtracking lookahead, Rust regex's Unicode \s = White_Space).
// Invalid UTF-8 bytes are single characters of the "other" class (they join [^\s\p{L}\p{N}]+ runs).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace llmt::data {

// End offset of the piece that starts at `pos` (requires pos < text.size()); always > pos.
std::size_t gpt2_next_piece(std::string_view text, std::size_t pos);

// All pieces of `text`, in order; their concatenation is `text`.
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

// Llama 3's (and tiktoken cl100k_base's) pattern, as Hugging Face `tokenizers` (Oniguruma) runs it in a
// Split pre-tokenizer with behavior Isolated:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// \s is Unicode White_Space (as for GPT-2); (?i) folds ASCII case and U+017F LATIN SMALL LETTER LONG S to
// 's' (CaseFolding.txt's only non-ASCII simple folding onto s, t, r, e, v, m, l or d). Invalid UTF-8 bytes
// are single characters of the "other" class, as for GPT-2.
std::size_t llama3_next_piece(std::string_view text, std::size_t pos);
std::vector<std::string_view> llama3_pretokenize(std::string_view text);

}  // namespace llmt::data
