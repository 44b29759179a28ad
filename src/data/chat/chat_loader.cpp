// ChatLoader / ChatEvalLoader (chat_loader.h): permuted rows, a global position, rows filled by ChatRows.
#include "data/chat/chat_loader.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"
#include "core/error.h"
#include "core/json_describe.h"
#include "data/shards/loader.h"

namespace llmt::data {
namespace {

void check_shape(int B, int T, int rank, int world) {
    LLMT_INTERNAL_CHECK(B >= 1, "chat loader: batch size B must be >= 1, got {}", B);
    LLMT_INTERNAL_CHECK(T >= 1, "chat loader: sequence length T must be >= 1, got {}", T);
    LLMT_INTERNAL_CHECK(world >= 1, "chat loader: world size must be >= 1, got {}", world);
    LLMT_INTERNAL_CHECK(rank >= 0 && rank < world, "chat loader: rank {} is outside [0, {})", rank, world);
}

// The model embeds ids below its vocab_size only; the cache was made with the tokenizer, not the model.
void check_vocab(const ChatData& d, std::size_t vocab_size) {
    LLMT_CHECK(d.pad_id < vocab_size,
               "chat data: the pad id {} (the tokenizer's end-of-text) is not below model.vocab_size {}", d.pad_id,
               vocab_size);
    const auto& toks = d.examples->tokens;
    const auto it = std::find_if(toks.begin(), toks.end(), [&](uint32_t t) { return t >= vocab_size; });
    LLMT_CHECK(
        it == toks.end(),
        "chat data in {}: token id {} is not below model.vocab_size {} (the tokenizer has more ids than the model)",
        d.dir.string(), it == toks.end() ? 0u : *it, vocab_size);
}

const ChatData& checked(const ChatData& d, const std::vector<uint32_t>& split, const char* name, int B, int T,
                        int rank, int world, std::size_t vocab_size) {
    check_shape(B, T, rank, world);
    LLMT_INTERNAL_CHECK(d.examples != nullptr, "chat loader: no examples loaded");
    LLMT_CHECK(!split.empty(), "chat data: the {} split is empty (data.val_fraction decides the validation share)",
               name);
    check_vocab(d, vocab_size);
    return d;
}

}  // namespace

ChatLoader::ChatLoader(const ChatData& data, ChatLoaderOptions opts)
    : examples_(checked(data, data.train, "train", opts.B, opts.T, opts.rank, opts.world, opts.vocab_size).examples),
      opts_(opts),
      rows_(*examples_, data.train, opts.T, opts.packing),
      pad_id_(data.pad_id),
      key_(data.key) {
    LLMT_CHECK(rows_.size() > 0, "chat data: no training example has a target left within T = {} tokens ({})", opts.T,
               rows_.stats().summary(opts.T));
}

std::size_t ChatLoader::row_at(uint64_t q) const {
    const uint64_t n = rows_.size();
    const uint64_t e = q / n;
    const auto k = static_cast<std::size_t>(q % n);
    if (!opts_.shuffle) return k;
    if (perm_epoch_ != static_cast<int64_t>(e)) {
        perm_ = epoch_permutation(n, opts_.seed, e);
        perm_epoch_ = static_cast<int64_t>(e);
    }
    return perm_[k];
}

uint64_t ChatLoader::rank_first(int ahead, int rank) const {
    const auto B = static_cast<uint64_t>(opts_.B);
    return position_ + static_cast<uint64_t>(ahead) * static_cast<uint64_t>(opts_.world) * B +
           static_cast<uint64_t>(rank) * B;
}

ChatBatch ChatLoader::batch_info(uint64_t first) const {
    ChatBatch b;
    b.T = opts_.packing ? opts_.T : 0;
    for (uint64_t j = 0; j < static_cast<uint64_t>(opts_.B); ++j) {
        const std::size_t row = row_at(first + j);
        b.T = std::max<int>(b.T, static_cast<int>(rows_.slots(row)));
        b.targets += rows_.targets(row);
    }
    return b;
}

ChatBatch ChatLoader::next(int32_t* inputs, int32_t* targets, int32_t* positions) {
    const uint64_t first = rank_first(0, opts_.rank);
    const ChatBatch b = batch_info(first);
    const auto stride = static_cast<std::size_t>(b.T);
    for (int j = 0; j < opts_.B; ++j) {
        const std::size_t o = static_cast<std::size_t>(j) * stride;
        rows_.fill(*examples_, row_at(first + static_cast<uint64_t>(j)), b.T, pad_id_, inputs + o, targets + o,
                   positions + o);
    }
    position_ += static_cast<uint64_t>(opts_.world) * static_cast<uint64_t>(opts_.B);
    return b;
}

ChatBatch ChatLoader::peek(int ahead) const {
    LLMT_INTERNAL_CHECK(ahead >= 0, "chat loader: peek({}) looks back", ahead);
    return batch_info(rank_first(ahead, opts_.rank));
}

int64_t ChatLoader::targets_ahead(int k) const {
    int64_t n = 0;
    for (int a = 0; a < k; ++a) n += peek(a).targets;
    return n;
}

int64_t ChatLoader::global_targets_ahead(int k) const {
    int64_t n = 0;
    for (int a = 0; a < k; ++a)
        for (int r = 0; r < opts_.world; ++r) n += batch_info(rank_first(a, r)).targets;
    return n;
}

nlohmann::json ChatLoader::state() const {
    return nlohmann::json{{"kind", "llmtrain.ChatLoader"},
                          {"version", 1},
                          {"position", position_},
                          {"epoch", position_ / rows_.size()},
                          {"cursor", position_ % rows_.size()},
                          {"num_rows", rows_.size()},
                          {"seq_len", opts_.T},
                          {"seed", opts_.seed},
                          {"shuffle", opts_.shuffle},
                          {"packing", opts_.packing},
                          {"slots", rows_.stats().slots},
                          {"data_key", key_}};
}

void ChatLoader::restore(const nlohmann::json& s) {
    LLMT_CHECK(s.is_object(), "chat loader state: expected a JSON object, got {}", s.type_name());
    auto field = [&](const char* name) -> const nlohmann::json& {
        auto it = s.find(name);
        LLMT_CHECK(it != s.end(), "chat loader state: missing field '{}'", name);
        return *it;
    };
    auto uint_field = [&](const char* name) -> uint64_t {
        const auto& v = field(name);
        LLMT_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0),
                   "chat loader state: field '{}' must be a non-negative integer, got {}", name, describe_json(v));
        return v.get<uint64_t>();
    };
    auto expect_eq = [&](const char* name, uint64_t mine) {
        const uint64_t theirs = uint_field(name);
        LLMT_CHECK(theirs == mine,
                   "chat loader state: field '{}' is {} but this loader has {} (different data or settings?)", name,
                   theirs, mine);
    };
    auto expect_bool = [&](const char* name, bool mine) {
        const auto& v = field(name);
        LLMT_CHECK(v.is_boolean() && v.get<bool>() == mine,
                   "chat loader state: field '{}' is {} but this loader has {}", name, describe_json(v), mine);
    };
    const auto& kind = field("kind");
    LLMT_CHECK(kind == "llmtrain.ChatLoader",
               "chat loader state: field 'kind' is {}, expected \"llmtrain.ChatLoader\"", describe_json(kind));
    LLMT_CHECK(uint_field("version") == 1, "chat loader state: field 'version' is {}, this build reads version 1",
               describe_json(field("version")));
    const auto& key = field("data_key");
    LLMT_CHECK(key.is_string() && key.get<std::string>() == key_,
               "chat loader state: field 'data_key' is {} but this loader's data is {} (the chat files, tokenizer or "
               "template changed)",
               describe_json(key), key_);
    expect_eq("num_rows", rows_.size());
    expect_eq("seq_len", static_cast<uint64_t>(opts_.T));
    expect_eq("seed", opts_.seed);
    expect_eq("slots", rows_.stats().slots);
    expect_bool("shuffle", opts_.shuffle);
    expect_bool("packing", opts_.packing);
    const uint64_t pos = uint_field("position");
    LLMT_CHECK(
        uint_field("epoch") == pos / rows_.size() && uint_field("cursor") == pos % rows_.size(),
        "chat loader state: fields 'epoch' ({}) and 'cursor' ({}) do not agree with 'position' ({}) over {} rows",
        describe_json(field("epoch")), describe_json(field("cursor")), pos, rows_.size());
    position_ = pos;
}

ChatEvalLoader::ChatEvalLoader(const ChatData& data, ChatEvalOptions opts)
    : examples_(
          checked(data, data.val, "validation", opts.B, opts.T, opts.rank, opts.world, opts.vocab_size).examples),
      opts_(opts),
      rows_(*examples_, data.val, opts.T, opts.packing),
      pad_id_(data.pad_id) {
    LLMT_CHECK(rows_.size() > 0, "chat data: no validation example has a target left within T = {} tokens ({})",
               opts.T, rows_.stats().summary(opts.T));
    const std::size_t global_rows = static_cast<std::size_t>(opts_.B) * static_cast<std::size_t>(opts_.world);
    num_batches_ = (rows_.size() + global_rows - 1) / global_rows;
}

ChatBatch ChatEvalLoader::info(std::size_t b) const {
    LLMT_INTERNAL_CHECK(b < num_batches_, "chat eval loader: batch {} requested but there are {}", b, num_batches_);
    const auto B = static_cast<std::size_t>(opts_.B);
    const std::size_t first = (b * static_cast<std::size_t>(opts_.world) + static_cast<std::size_t>(opts_.rank)) * B;
    ChatBatch out;
    out.T = opts_.packing ? opts_.T : 1;
    for (std::size_t j = first; j < first + B && j < rows_.size(); ++j) {
        out.T = std::max<int>(out.T, static_cast<int>(rows_.slots(j)));
        out.targets += rows_.targets(j);
    }
    return out;
}

int64_t ChatEvalLoader::global_targets(std::size_t b) const {
    const std::size_t global_rows = static_cast<std::size_t>(opts_.B) * static_cast<std::size_t>(opts_.world);
    int64_t n = 0;
    for (std::size_t j = b * global_rows; j < (b + 1) * global_rows && j < rows_.size(); ++j) n += rows_.targets(j);
    return n;
}

ChatBatch ChatEvalLoader::batch(std::size_t b, int32_t* inputs, int32_t* targets, int32_t* positions) const {
    const ChatBatch out = info(b);
    const auto B = static_cast<std::size_t>(opts_.B);
    const auto stride = static_cast<std::size_t>(out.T);
    const std::size_t first = (b * static_cast<std::size_t>(opts_.world) + static_cast<std::size_t>(opts_.rank)) * B;
    for (std::size_t j = 0; j < B; ++j) {
        int32_t* x = inputs + j * stride;
        int32_t* y = targets + j * stride;
        int32_t* p = positions + j * stride;
        if (first + j < rows_.size()) {
            rows_.fill(*examples_, first + j, out.T, pad_id_, x, y, p);
        } else {
            for (int i = 0; i < out.T; ++i) {  // past the last row: all pad, one segment
                x[i] = static_cast<int32_t>(pad_id_);
                y[i] = -1;
                p[i] = i;
            }
        }
    }
    return out;
}

}  // namespace llmt::data
