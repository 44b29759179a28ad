// ChatRows (chat_rows.h): truncation, Best-Fit Decreasing packing, and filling a row's three arrays.
#include "data/chat/chat_rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>

#include "core/check.h"

namespace llmt::data {
namespace {

// Targets of an example's first `slots` slots: slot i predicts token i+1.
uint32_t count_targets(std::span<const uint8_t> assistant, uint32_t slots) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < slots; ++i) n += assistant[i + 1];
    return n;
}

}  // namespace

std::string ChatRowStats::summary(int T) const {
    std::string s =
        fmt::format("{} examples in {} rows of T={} ({:.1f}% of slots used, {} targets)", examples - dropped, rows, T,
                    rows ? 100.0 * static_cast<double>(slots) / (static_cast<double>(rows) * T) : 0.0, targets);
    if (truncated)
        s += fmt::format(", {} truncated to {} tokens ({} dropped: no target left)", truncated, T + 1, dropped);
    return s;
}

std::vector<std::vector<uint32_t>> best_fit_decreasing(std::span<const uint32_t> lengths, uint32_t capacity) {
    std::vector<uint32_t> order(lengths.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return lengths[a] > lengths[b]; });
    std::vector<std::vector<uint32_t>> bins;
    std::vector<uint32_t> free_space;
    std::map<uint32_t, std::deque<uint32_t>> by_space;  // free space -> bins with it, oldest first
    for (uint32_t item : order) {
        const uint32_t len = lengths[item];
        LLMT_INTERNAL_CHECK(len >= 1 && len <= capacity, "best_fit_decreasing: length {} outside [1, {}]", len,
                            capacity);
        auto it = by_space.lower_bound(len);
        uint32_t bin;
        if (it == by_space.end()) {
            bin = static_cast<uint32_t>(bins.size());
            bins.emplace_back();
            free_space.push_back(capacity);
        } else {
            bin = it->second.front();
            it->second.pop_front();
            if (it->second.empty()) by_space.erase(it);
        }
        bins[bin].push_back(item);
        free_space[bin] -= len;
        if (free_space[bin] > 0) by_space[free_space[bin]].push_back(bin);
    }
    return bins;
}

ChatRows::ChatRows(const ChatDataset& ds, std::span<const uint32_t> examples, int T, bool packing) {
    LLMT_INTERNAL_CHECK(T >= 1, "chat rows: T must be >= 1, got {}", T);
    stats_.examples = examples.size();
    std::vector<ChatPiece> kept;
    std::vector<uint32_t> kept_targets;
    for (uint32_t e : examples) {
        const std::size_t n = ds.length(e);
        if (n < 2) continue;  // a template always writes more; nothing to predict from one token
        const auto slots = static_cast<uint32_t>(std::min<std::size_t>(n - 1, static_cast<std::size_t>(T)));
        const uint32_t targets = count_targets(ds.assistant_of(e), slots);
        if (n - 1 > static_cast<std::size_t>(T)) ++stats_.truncated;
        if (targets == 0) {
            ++stats_.dropped;
            continue;
        }
        kept.push_back({e, slots});
        kept_targets.push_back(targets);
    }
    auto add_row = [&](const std::vector<uint32_t>& members) {
        uint32_t slots = 0, targets = 0;
        for (uint32_t k : members) {
            pieces_.push_back(kept[k]);
            slots += kept[k].slots;
            targets += kept_targets[k];
        }
        row_begin_.push_back(pieces_.size());
        row_slots_.push_back(slots);
        row_targets_.push_back(targets);
        stats_.slots += slots;
        stats_.targets += targets;
    };
    if (packing) {
        std::vector<uint32_t> lengths(kept.size());
        for (std::size_t k = 0; k < kept.size(); ++k) lengths[k] = kept[k].slots;
        for (const auto& bin : best_fit_decreasing(lengths, static_cast<uint32_t>(T))) add_row(bin);
    } else {
        for (uint32_t k = 0; k < kept.size(); ++k) add_row({k});
    }
    stats_.rows = size();
}

void ChatRows::fill(const ChatDataset& ds, std::size_t row, int T_row, uint32_t pad_id, int32_t* inputs,
                    int32_t* targets, int32_t* positions) const {
    LLMT_INTERNAL_CHECK(T_row >= 0 && static_cast<uint32_t>(T_row) >= row_slots_[row],
                        "chat rows: row {} has {} slots, more than the {} given", row, row_slots_[row], T_row);
    int at = 0;
    for (const ChatPiece& p : pieces(row)) {
        const auto tok = ds.tokens_of(p.example);
        const auto asst = ds.assistant_of(p.example);
        for (uint32_t i = 0; i < p.slots; ++i, ++at) {
            inputs[at] = static_cast<int32_t>(tok[i]);
            targets[at] = asst[i + 1] ? static_cast<int32_t>(tok[i + 1]) : -1;
            positions[at] = static_cast<int32_t>(i);
        }
    }
    for (int p = 0; at < T_row; ++at, ++p) {
        inputs[at] = static_cast<int32_t>(pad_id);
        targets[at] = -1;
        positions[at] = p;
    }
}

}  // namespace llmt::data
