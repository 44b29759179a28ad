// Slots cut to an arena slice (param_slots.h).
#include "optim/param_slots.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "core/check.h"
#include "core/safetensors.h"

namespace llmt::optim {
namespace {

std::size_t numel_of(const ParamSlot& s, const char* who) {
    std::size_t n = 1;
    for (auto d : s.shape) {
        LLMT_INTERNAL_CHECK(d >= 0, "{}: parameter '{}' has negative extent in shape {}", who, s.name,
                            shape_str(s.shape));
        n *= static_cast<std::size_t>(d);
    }
    return n;
}

}  // namespace

SlicePlan plan_slice(const std::vector<ParamSlot>& slots, std::size_t arena_numel, ArenaSlice slice, const char* who) {
    SlicePlan plan;
    plan.begin = slice.begin;
    plan.end = slice.end == SIZE_MAX ? arena_numel : slice.end;
    LLMT_INTERNAL_CHECK(plan.begin < plan.end && plan.end <= arena_numel,
                        "{}: slice [{}, {}) is empty or outside the arena of {} elements", who, slice.begin, plan.end,
                        arena_numel);
    std::set<std::string> names;
    std::vector<std::size_t> order(slots.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return slots[a].offset < slots[b].offset; });
    std::size_t prev_end = 0;
    const ParamSlot* prev = nullptr;
    for (std::size_t i : order) {
        const ParamSlot& s = slots[i];
        LLMT_INTERNAL_CHECK(!s.name.empty() && s.name != "step", "{}: parameter name '{}' is reserved or empty", who,
                            s.name);
        LLMT_INTERNAL_CHECK(names.insert(s.name).second, "{}: parameter '{}' listed twice", who, s.name);
        const std::size_t n = numel_of(s, who);
        LLMT_INTERNAL_CHECK(s.offset + n <= arena_numel, "{}: parameter '{}' [{}, {}) leaves the arena of {} elements",
                            who, s.name, s.offset, s.offset + n, arena_numel);
        LLMT_INTERNAL_CHECK(prev == nullptr || s.offset >= prev_end,
                            "{}: parameter '{}' at {} overlaps '{}' (ends at {})", who, s.name, s.offset,
                            prev ? prev->name : "", prev_end);
        prev = &s;
        prev_end = s.offset + n;
        const std::size_t b = std::max(s.offset, plan.begin), e = std::min(s.offset + n, plan.end);
        if (b >= e) continue;
        plan.pieces.push_back({i, b, e, b == s.offset && e == s.offset + n});
        if (!plan.runs.empty() && plan.runs.back().end == b && plan.runs.back().decay == s.decay) {
            plan.runs.back().end = e;
        } else {
            plan.runs.push_back({b, e, s.decay});
        }
    }
    return plan;
}

}  // namespace llmt::optim
