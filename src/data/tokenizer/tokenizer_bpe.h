// The merge loop of byte-level BPE, without any cache: merge the adjacent pair of lowest rank, leftmost on
// ties (tiktoken's byte_pair_merge, where the rank is the id of the concatenation; Hugging Face's BPE,
// where it is the pair's index in the merge list). The encoder (tokenizer.cpp) puts its per-thread caches
// in front of it; tests compare the two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "data/tokenizer/tokenizer_vocab.h"

namespace llmt::data {

// Appends the ids the merges make of the n >= 1 bytes at p.
void bpe_merge(const TokenizerImpl& v, const unsigned char* p, std::size_t n, std::vector<uint32_t>& out);

// Appends the ids of one pre-token (piece, not empty): its token when the piece is one and
// v.whole_word_first (tiktoken checks this before merging; Hugging Face with ignore_merges), else
// bpe_merge's.
void encode_piece_uncached(const TokenizerImpl& v, std::string_view piece, std::vector<uint32_t>& out);

}  // namespace llmt::data
