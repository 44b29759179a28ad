// A list of shards read as one token stream (shard boundaries are invisible to readers), used by the
// train and eval loaders. Shards are taken in sorted path order so a glob's expansion order is moot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/shards/shard.h"

namespace llmt::data {

// Thread safety: const methods may be called concurrently.
class ShardSet {
public:
    // Opens every shard (header checks only; see Shard). Throws InputError when `paths` is empty,
    // a path repeats, or the shards hold fewer than `min_tokens` tokens in all.
    ShardSet(std::vector<std::string> paths, ShardFormat format, std::size_t vocab_size, std::size_t min_tokens = 1);

    std::size_t size() const { return total_; }  // tokens in all shards
    const std::vector<Shard>& shards() const { return shards_; }

    // Copies stream tokens [begin, begin+n) as int32, crossing shard boundaries. Requires
    // begin+n <= size(). Throws FormatError (file + byte offset) for ids >= vocab_size.
    void read(std::size_t begin, std::size_t n, int32_t* out) const;

private:
    std::vector<Shard> shards_;
    std::vector<std::size_t> starts_;  // stream offset of each shard's first token
    std::size_t total_ = 0;
};

}  // namespace llmt::data
