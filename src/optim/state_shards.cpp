// Optimizer state read across shards of another slicing (state_shards.h).
#include "optim/state_shards.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "optim/optimizer.h"

namespace llmt::optim {
namespace {

std::size_t slot_numel(const ParamSlot& s) {
    std::size_t n = 1;
    for (auto d : s.shape) n *= static_cast<std::size_t>(d);
    return n;
}

std::size_t metadata_size(const SafetensorsFile& f, const char* key) {
    const auto it = f.metadata().find(key);
    if (it == f.metadata().end())
        throw CheckpointError(fmt::format("optimizer state '{}': metadata '{}' missing", f.path(), key));
    try {
        std::size_t used = 0;
        const unsigned long long v = std::stoull(it->second, &used);
        if (used == it->second.size()) return static_cast<std::size_t>(v);
    } catch (const std::logic_error&) {
    }
    throw CheckpointError(
        fmt::format("optimizer state '{}': metadata '{}' is '{}', expected a count", f.path(), key, it->second));
}

// One copy of `count` floats from a shard's tensor into dst.
struct Copy {
    float* dst;
    const std::uint8_t* src;
    std::size_t dst_offset, count;
};

}  // namespace

std::vector<StateShard> check_state_shards(const std::vector<const SafetensorsFile*>& files, const std::string& format,
                                           const char* name, std::size_t arena_numel, std::size_t begin,
                                           std::size_t end, std::int64_t* step) {
    std::vector<StateShard> shards;
    for (const SafetensorsFile* f : files) {
        check_state_owner(*f, format, name);
        const auto it = f->metadata().find("format");
        if (it == f->metadata().end() || it->second != format)
            throw CheckpointError(fmt::format("optimizer state '{}': metadata 'format' is '{}', expected '{}'",
                                              f->path(), it == f->metadata().end() ? "" : it->second, format));
        const std::size_t numel = metadata_size(*f, "arena_numel");
        if (numel != arena_numel)
            throw CheckpointError(fmt::format("optimizer state '{}' is for an arena of {} elements, this model's "
                                              "has {}",
                                              f->path(), numel, arena_numel));
        StateShard s{f, metadata_size(*f, "slice_begin"), metadata_size(*f, "slice_end")};
        if (s.begin >= s.end || s.end > arena_numel)
            throw CheckpointError(fmt::format("optimizer state '{}': slice [{}, {}) is empty or outside the arena "
                                              "of {}",
                                              f->path(), s.begin, s.end, arena_numel));
        std::int64_t st = 0;
        f->read_exact("step", StDType::kI64, {}, &st);
        if (st < 0)
            throw CheckpointError(fmt::format("optimizer state '{}': step is {}, expected >= 0", f->path(), st));
        if (!shards.empty() && st != *step)
            throw CheckpointError(fmt::format("optimizer state '{}' is at step {} and '{}' at step {}: the shards "
                                              "are of different saves",
                                              f->path(), st, shards.front().file->path(), *step));
        *step = st;
        shards.push_back(s);
    }
    std::sort(shards.begin(), shards.end(),
              [](const StateShard& a, const StateShard& b) { return a.begin < b.begin; });
    std::size_t covered = begin, gap_end = end;
    for (std::size_t i = 0; i < shards.size(); ++i) {
        if (i > 0 && shards[i].begin < shards[i - 1].end)
            throw CheckpointError(fmt::format("optimizer state '{}' [{}, {}) overlaps '{}' [{}, {})",
                                              shards[i].file->path(), shards[i].begin, shards[i].end,
                                              shards[i - 1].file->path(), shards[i - 1].begin, shards[i - 1].end));
    }
    for (const StateShard& s : shards) {
        if (s.begin > covered && covered < end) {
            gap_end = std::min(end, s.begin);
            break;
        }
        covered = std::max(covered, s.end);
    }
    if (covered < end)
        throw CheckpointError(
            fmt::format("optimizer state: no file holds arena elements [{}, {}), which this rank's slice [{}, {}) "
                        "needs",
                        covered, gap_end, begin, end));
    return shards;
}

void read_sharded_state(const std::vector<StateShard>& shards, const std::vector<ParamSlot>& slots,
                        const SlicePlan& plan, const std::vector<StateTarget>& targets) {
    std::vector<Copy> copies;
    for (const StateTarget& t : targets) for (const SlicePlan::Piece& p : plan.pieces) {
        const ParamSlot& s = slots[p.slot];
        const std::size_t s_begin = s.offset, s_end = s.offset + slot_numel(s);
        for (const StateShard& sh : shards) {
            const std::size_t lo = std::max(p.begin, sh.begin), hi = std::min(p.end, sh.end);
            if (lo >= hi) continue;
            // The shard stored the slot's part inside its own slice, contiguously.
            const std::size_t first = std::max(s_begin, sh.begin), last = std::min(s_end, sh.end);
            const std::string tensor = s.name + t.suffix;
            if (!sh.file->contains(tensor))
                throw CheckpointError(
                    fmt::format("optimizer state '{}': tensor '{}' missing (its slice [{}, {}) holds "
                                "part of '{}')",
                                sh.file->path(), tensor, sh.begin, sh.end, s.name));
            const TensorInfo& info = sh.file->info(tensor);
            if (info.dtype != StDType::kF32 || info.numel != last - first)
                throw CheckpointError(fmt::format("optimizer state '{}': tensor '{}' has {} elements of {}, expected "
                                                  "{} F32 (arena [{}, {}))",
                                                  sh.file->path(), tensor, info.numel, st_dtype_name(info.dtype),
                                                  last - first, first, last));
            copies.push_back({t.dst, sh.file->raw(tensor) + (lo - first) * sizeof(float), lo - plan.begin, hi - lo});
        }
    }
    for (const Copy& c : copies) std::memcpy(c.dst + c.dst_offset, c.src, c.count * sizeof(float));
}

}  // namespace llmt::optim
