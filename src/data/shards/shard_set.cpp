// ShardSet: sorted shards concatenated into one stream (see shard_set.h).
#include "data/shards/shard_set.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"
#include "core/error.h"

namespace llmt::data {

ShardSet::ShardSet(std::vector<std::string> paths, ShardFormat format, std::size_t vocab_size,
                   std::size_t min_tokens) {
    LLMT_CHECK(!paths.empty(),
               "no token shards given (hint: check the shard glob, or run `llmtrain data prepare` first)");
    std::sort(paths.begin(), paths.end());
    auto dup = std::adjacent_find(paths.begin(), paths.end());
    LLMT_CHECK(dup == paths.end(), "shard '{}' is listed twice", *dup);
    for (const auto& p : paths) {
        starts_.push_back(total_);
        shards_.push_back(Shard::open(p, format, vocab_size));
        total_ += shards_.back().size();
    }
    LLMT_CHECK(total_ >= min_tokens,
               "the {} shard(s) starting with '{}' hold {} tokens in all; at least {} are needed", paths.size(),
               paths.front(), total_, min_tokens);
}

void ShardSet::read(std::size_t begin, std::size_t n, int32_t* out) const {
    LLMT_ASSERT(begin <= total_ && n <= total_ - begin);
    // The last shard starting at or before `begin`; empty shards are skipped by the loop below.
    std::size_t i =
        static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
    while (n > 0) {
        const Shard& s = shards_[i];
        const std::size_t off = begin - starts_[i];
        if (off >= s.size()) {
            ++i;
            continue;
        }
        const std::size_t take = std::min(n, s.size() - off);
        s.read(off, take, out);
        out += take;
        begin += take;
        n -= take;
        ++i;
    }
}

}  // namespace llmt::data
