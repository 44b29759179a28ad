// DataLoader / EvalLoader (loader.h): permuted T+1 windows over a ShardSet, global position counter.
#include "data/shards/loader.h"

#include <fmt/format.h>

#include <cstring>
#include <numeric>

#include "core/check.h"
#include "core/error.h"
#include "core/json_describe.h"

namespace llmt::data {
namespace {

// splitmix64's finalizer (Steele et al. 2014): a bijective 64-bit mixer, the core of a counter RNG.
uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void check_shape(int B, int T, int rank, int world) {
    LLMT_INTERNAL_CHECK(B >= 1, "data loader: batch size B must be >= 1, got {}", B);
    LLMT_INTERNAL_CHECK(T >= 1, "data loader: sequence length T must be >= 1, got {}", T);
    LLMT_INTERNAL_CHECK(world >= 1, "data loader: world size must be >= 1, got {}", world);
    LLMT_INTERNAL_CHECK(rank >= 0 && rank < world, "data loader: rank {} is outside [0, {})", rank, world);
}

__extension__ typedef unsigned __int128 u128;  // GCC/Clang builtin; -Wpedantic wants the marker

void split_window(const std::vector<int32_t>& win, int T, int32_t* inputs, int32_t* targets) {
    std::memcpy(inputs, win.data(), static_cast<std::size_t>(T) * sizeof(int32_t));
    std::memcpy(targets, win.data() + 1, static_cast<std::size_t>(T) * sizeof(int32_t));
}

}  // namespace

std::vector<uint32_t> epoch_permutation(std::size_t n, uint64_t seed, uint64_t epoch) {
    std::vector<uint32_t> p(n);
    std::iota(p.begin(), p.end(), 0u);
    const uint64_t key = mix64(mix64(seed) ^ epoch);
    for (std::size_t i = n; i > 1; --i) {
        // j uniform in [0, i) by multiply-shift; its bias is below i / 2^64, far below anything
        // measurable, and it keeps one hash per step (no rejection loop to make resumes fiddly).
        const uint64_t r = mix64(key ^ mix64(static_cast<uint64_t>(i)));
        const auto j = static_cast<std::size_t>((static_cast<u128>(r) * i) >> 64);
        std::swap(p[i - 1], p[j]);
    }
    return p;
}

DataLoader::DataLoader(LoaderOptions opts)
    : opts_((check_shape(opts.B, opts.T, opts.rank, opts.world), std::move(opts))),
      shards_(opts_.shard_paths, opts_.format, opts_.vocab_size, static_cast<std::size_t>(opts_.T) + 1) {
    num_windows_ = (shards_.size() - 1) / static_cast<std::size_t>(opts_.T);
    LLMT_CHECK(num_windows_ <= UINT32_MAX,
               "data loader: {} windows are more than the loader indexes (2^32-1); use a larger T", num_windows_);
    scratch_.resize(static_cast<std::size_t>(opts_.T) + 1);
}

void DataLoader::ensure_permutation(uint64_t epoch) {
    if (!opts_.shuffle || perm_epoch_ == static_cast<int64_t>(epoch)) return;
    perm_ = epoch_permutation(num_windows_, opts_.seed, epoch);
    perm_epoch_ = static_cast<int64_t>(epoch);
}

std::size_t DataLoader::window_at(uint64_t q) {
    const uint64_t e = q / num_windows_;
    const std::size_t k = static_cast<std::size_t>(q % num_windows_);
    if (!opts_.shuffle) return k;
    ensure_permutation(e);
    return perm_[k];
}

void DataLoader::next(int32_t* inputs, int32_t* targets) {
    const auto B = static_cast<uint64_t>(opts_.B);
    const auto T = static_cast<std::size_t>(opts_.T);
    const uint64_t first = position_ + static_cast<uint64_t>(opts_.rank) * B;
    for (uint64_t j = 0; j < B; ++j) {
        const std::size_t w = window_at(first + j);
        shards_.read(w * T, T + 1, scratch_.data());
        split_window(scratch_, opts_.T, inputs + j * T, targets + j * T);
    }
    position_ += static_cast<uint64_t>(opts_.world) * B;
}

nlohmann::json DataLoader::state() const {
    return nlohmann::json{{"kind", "llmtrain.DataLoader"},
                          {"version", 1},
                          {"position", position_},
                          {"epoch", position_ / num_windows_},
                          {"cursor", position_ % num_windows_},
                          {"num_windows", num_windows_},
                          {"seq_len", opts_.T},
                          {"seed", opts_.seed},
                          {"shuffle", opts_.shuffle},
                          {"total_tokens", shards_.size()}};
}

void DataLoader::restore(const nlohmann::json& s) {
    LLMT_CHECK(s.is_object(), "data loader state: expected a JSON object, got {}", s.type_name());
    auto field = [&](const char* name) -> const nlohmann::json& {
        auto it = s.find(name);
        LLMT_CHECK(it != s.end(), "data loader state: missing field '{}'", name);
        return *it;
    };
    auto uint_field = [&](const char* name) -> uint64_t {
        const auto& v = field(name);
        LLMT_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0),
                   "data loader state: field '{}' must be a non-negative integer, got {}", name, describe_json(v));
        return v.get<uint64_t>();
    };
    const auto& kind = field("kind");
    LLMT_CHECK(kind == "llmtrain.DataLoader",
               "data loader state: field 'kind' is {}, expected \"llmtrain.DataLoader\"", describe_json(kind));
    LLMT_CHECK(uint_field("version") == 1, "data loader state: field 'version' is {}, this build reads version 1",
               describe_json(field("version")));
    auto expect_eq = [&](const char* name, uint64_t mine, const char* what) {
        const uint64_t theirs = uint_field(name);
        LLMT_CHECK(theirs == mine,
                   "data loader state: field '{}' is {} but this loader has {} {} (different data or settings?)", name,
                   theirs, what, mine);
    };
    expect_eq("num_windows", num_windows_, "num_windows");
    expect_eq("seq_len", static_cast<uint64_t>(opts_.T), "T =");
    expect_eq("seed", opts_.seed, "seed");
    expect_eq("total_tokens", shards_.size(), "total_tokens");
    const auto& sh = field("shuffle");
    LLMT_CHECK(sh.is_boolean() && sh.get<bool>() == opts_.shuffle,
               "data loader state: field 'shuffle' is {} but this loader has shuffle = {}", describe_json(sh),
               opts_.shuffle);
    const uint64_t pos = uint_field("position");
    LLMT_CHECK(
        uint_field("epoch") == pos / num_windows_ && uint_field("cursor") == pos % num_windows_,
        "data loader state: fields 'epoch' ({}) and 'cursor' ({}) do not agree with 'position' ({}) over {} windows",
        describe_json(field("epoch")), describe_json(field("cursor")), pos, num_windows_);
    position_ = pos;
}

EvalLoader::EvalLoader(EvalLoaderOptions opts)
    : opts_((check_shape(opts.B, opts.T, opts.rank, opts.world), std::move(opts))),
      shards_(opts_.shard_paths, opts_.format, opts_.vocab_size, static_cast<std::size_t>(opts_.T) + 1) {
    num_windows_ = (shards_.size() - 1) / static_cast<std::size_t>(opts_.T);
    const std::size_t global_rows = static_cast<std::size_t>(opts_.B) * static_cast<std::size_t>(opts_.world);
    num_batches_ = num_windows_ / global_rows;
    LLMT_CHECK(num_batches_ >= 1,
               "eval loader: the validation shards hold {} tokens = {} windows of T+1 = {} tokens, fewer than one "
               "global batch of "
               "{} rows (B = {} x world {}) (hint: lower B or T, or prepare with a larger --val-fraction)",
               shards_.size(), num_windows_, opts_.T + 1, global_rows, opts_.B, opts_.world);
}

void EvalLoader::batch(std::size_t b, int32_t* inputs, int32_t* targets) const {
    LLMT_INTERNAL_CHECK(b < num_batches_, "eval loader: batch {} requested but only {} fit the validation shards", b,
                        num_batches_);
    const auto B = static_cast<std::size_t>(opts_.B);
    const auto T = static_cast<std::size_t>(opts_.T);
    std::vector<int32_t> win(T + 1);
    const std::size_t first = (b * static_cast<std::size_t>(opts_.world) + static_cast<std::size_t>(opts_.rank)) * B;
    for (std::size_t j = 0; j < B; ++j) {
        shards_.read((first + j) * T, T + 1, win.data());
        split_window(win, opts_.T, inputs + j * T, targets + j * T);
    }
}

}  // namespace llmt::data
