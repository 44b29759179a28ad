// Arena: layout, one aligned allocation, named views (core/arena.h).
#include "core/arena.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

#include "core/arena_stats.h"
#include "core/device_memory.h"

namespace llmt {
namespace {

// Live and peak bytes per device, and each live buffer's size (allocations are few: one per arena).
struct Counters {
    std::mutex mu;
    std::unordered_map<const void*, size_t> sizes;
    ArenaBytes bytes[2];
};

Counters& counters() {
    static Counters c;
    return c;
}

void count_alloc(Device device, const void* p, size_t n) {
    Counters& c = counters();
    const std::lock_guard<std::mutex> lock(c.mu);
    c.sizes[p] = n;
    ArenaBytes& b = c.bytes[static_cast<size_t>(device)];
    b.live += n;
    b.peak = std::max(b.peak, b.live);
}

void count_free(Device device, const void* p) noexcept {
    Counters& c = counters();
    const std::lock_guard<std::mutex> lock(c.mu);
    const auto it = c.sizes.find(p);
    if (it == c.sizes.end()) return;
    c.bytes[static_cast<size_t>(device)].live -= it->second;
    c.sizes.erase(it);
}

}  // namespace

ArenaBytes arena_bytes(Device device) {
    Counters& c = counters();
    const std::lock_guard<std::mutex> lock(c.mu);
    return c.bytes[static_cast<size_t>(device)];
}

void reset_arena_peak(Device device) {
    Counters& c = counters();
    const std::lock_guard<std::mutex> lock(c.mu);
    ArenaBytes& b = c.bytes[static_cast<size_t>(device)];
    b.peak = b.live;
}

void Arena::FreeDeleter::operator()(void* p) const {
    count_free(device, p);
    if (device == Device::kCpu) std::free(p);
    else device_memory(device).free(p);
}

size_t Arena::add(std::string name, std::vector<int64_t> shape, DType dtype) {
    LLMT_INTERNAL_CHECK(!allocated(), "arena: cannot add view '{}' after allocate()", name);
    LLMT_INTERNAL_CHECK(!by_name_.count(name), "arena: duplicate view name '{}'", name);
    LLMT_INTERNAL_CHECK(shape.size() <= static_cast<size_t>(Tensor::kMaxDims),
               "arena: view '{}' has {} dims, at most {} supported", name, shape.size(),
               Tensor::kMaxDims);
    // Shapes come from configs: sizes that overflow 64 bits are refused, never wrapped.
    size_t n = 1, nbytes = 0, total = 0;
    for (int64_t d : shape) {
        LLMT_INTERNAL_CHECK(d >= 0, "arena: view '{}' has negative extent {}", name, d);
        LLMT_CHECK(!__builtin_mul_overflow(n, static_cast<size_t>(d), &n),
                   "arena: view '{}' has more elements than 64-bit sizes hold", name);
    }
    LLMT_CHECK(!__builtin_mul_overflow(n, dtype_size(dtype), &nbytes) && nbytes <= SIZE_MAX - kAlignment &&
                   !__builtin_add_overflow(total_, (nbytes + kAlignment - 1) / kAlignment * kAlignment, &total),
               "arena: view '{}' takes the arena beyond 64-bit byte sizes", name);
    Entry e;
    e.name = std::move(name);
    e.shape = std::move(shape);
    e.dtype = dtype;
    e.offset = total_;
    e.nbytes = nbytes;
    total_ = total;
    by_name_.emplace(e.name, entries_.size());
    entries_.push_back(std::move(e));
    return entries_.size() - 1;
}

void Arena::allocate(bool zero_fill, Device dev) {
    LLMT_INTERNAL_CHECK(!allocated(), "arena: allocate() called twice");
    size_t bytes = total_ == 0 ? kAlignment : total_;  // total_ is already a multiple of kAlignment
    void* p = nullptr;
    if (dev == Device::kCpu) {
        p = std::aligned_alloc(kAlignment, bytes);
        if (!p) throw std::bad_alloc();
    } else {
        p = device_memory(dev).alloc(bytes);  // cudaMalloc: 256-byte aligned, a multiple of kAlignment
    }
    buffer_ = std::unique_ptr<std::byte, FreeDeleter>(static_cast<std::byte*>(p), FreeDeleter{dev});
    count_alloc(dev, p, bytes);
    if (zero_fill) zero();
}

Arena Arena::mirror() const {
    Arena m;
    m.entries_ = entries_;
    m.by_name_ = by_name_;
    m.total_ = total_;
    m.allocate(true, device());
    return m;
}

size_t Arena::index(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    LLMT_INTERNAL_CHECK(it != by_name_.end(), "arena: no view named '{}' ({} views)", name, entries_.size());
    return it->second;
}

bool Arena::contains(std::string_view name) const { return by_name_.count(std::string(name)) != 0; }

Tensor Arena::view(size_t i) const {
    LLMT_INTERNAL_CHECK(allocated(), "arena: view {} requested before allocate()", i);
    LLMT_INTERNAL_CHECK(i < entries_.size(), "arena: view index {} out of range ({} views)", i, entries_.size());
    const Entry& e = entries_[i];
    Tensor t;
    t.data = buffer_.get() + e.offset;
    t.ndim = static_cast<int>(e.shape.size());
    for (size_t d = 0; d < e.shape.size(); ++d) t.shape[d] = e.shape[d];
    t.dtype = e.dtype;
    t.device = device();
    return t;
}

void Arena::zero() {
    if (!buffer_) return;
    if (device() == Device::kCpu) std::memset(buffer_.get(), 0, total_);
    else device_memory(device()).zero(buffer_.get(), total_);
}

}  // namespace llmt
