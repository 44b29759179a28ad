// GPT-2's pre-tokenizer, hand-written: the pieces tiktoken's regex
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

}  // namespace llmt::data
