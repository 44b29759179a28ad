// Arena: one 64-byte-aligned contiguous buffer carved into named tensor views (llm.c's single
// allocation for parameters, gradients and activations; docs/design.md §1). Build the layout with add(),
// then allocate() once; mirror() makes a second arena of the same layout (the gradient buffer, which
// the distributed layer all-reduces as one flat range).
// Thread safety: layout calls are not thread-safe; views may be used from any thread once allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace llmt {

class Arena {
public:
    static constexpr size_t kAlignment = 64;  // every view starts on a cache line / AVX-512 vector

    struct Entry {
        std::string name;
        std::vector<int64_t> shape;
        DType dtype = DType::kF32;
        size_t offset = 0;  // bytes from the start of the buffer, a multiple of kAlignment
        size_t nbytes = 0;
    };

    Arena() = default;
    Arena(Arena&&) noexcept = default;
    Arena& operator=(Arena&&) noexcept = default;
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;
    ~Arena() = default;

    // Appends a view to the layout and returns its index. Throws InputError on a duplicate name, more
    // than 4 dims, or when called after allocate().
    size_t add(std::string name, std::vector<int64_t> shape, DType dtype = DType::kF32);

    // Allocates the buffer on `device`: CPU memory, or device memory through the functions the backend
    // registered (core/device_memory.h; DeviceError when none is). zero=false leaves the memory
    // uninitialised, for activation arenas every byte of which a forward pass writes.
    // Throws InputError if already allocated, IoError-free: std::bad_alloc (CPU) or DeviceError on
    // exhaustion.
    void allocate(bool zero = true, Device device = Device::kCpu);

    // A new, allocated (and zeroed) arena with the same layout on the same device.
    Arena mirror() const;

    bool allocated() const { return buffer_ != nullptr; }
    size_t size() const { return entries_.size(); }
    size_t nbytes() const { return total_; }  // whole buffer including alignment gaps
    void* data() const { return buffer_.get(); }
    Device device() const { return buffer_.get_deleter().device; }
    const Entry& entry(size_t i) const { return entries_.at(i); }
    const std::vector<Entry>& entries() const { return entries_; }
    // Index of a view by name; throws InputError naming the missing view.
    size_t index(std::string_view name) const;
    bool contains(std::string_view name) const;

    // The view at index i / with this name. Throws InputError before allocate().
    Tensor view(size_t i) const;
    Tensor view(std::string_view name) const { return view(index(name)); }

    // Sets every byte (gaps included) to zero (on the device for device arenas; synchronous).
    void zero();

private:
    struct FreeDeleter {
        // Constructors, not a member initialiser: unique_ptr needs it default-constructible while
        // Arena is still incomplete.
        FreeDeleter() noexcept : device(Device::kCpu) {}
        explicit FreeDeleter(Device d) noexcept : device(d) {}
        Device device;
        void operator()(void* p) const;
    };
    std::vector<Entry> entries_;
    std::unordered_map<std::string, size_t> by_name_;
    size_t total_ = 0;
    std::unique_ptr<std::byte, FreeDeleter> buffer_;
};

}  // namespace llmt
