// safetensors reader and writer (Hugging Face format, https://github.com/huggingface/safetensors):
// u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}, "__metadata__":
// {str: str}}, then the tensor bytes. The reader validates every field before any tensor is touched;
// the writer is atomic (temp + fsync + rename). docs/formats/checkpoint.md describes how we use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace llmt {

// Element types of the safetensors format (names as in its JSON header).
enum class StDType : std::uint8_t {
    kBool, kU8, kI8, kF8E5M2, kF8E4M3, kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kF64, kI64, kU64,
};

std::size_t st_dtype_size(StDType t);           // bytes per element
std::string_view st_dtype_name(StDType t);      // "F32", "BF16", ...
bool st_dtype_from_name(std::string_view name, StDType* out);  // false for an unknown name

// The file dtype of a core::DType (every DType has one).
StDType st_dtype_of(DType t);

using Shape = std::vector<std::int64_t>;
std::string shape_str(const Shape& s);  // "[768, 2304]"

// A tensor to write: non-owning; `data` must hold numel(shape) * st_dtype_size(dtype) bytes and stay
// valid until write_safetensors returns.
struct TensorRef {
    std::string name;
    StDType dtype = StDType::kF32;
    Shape shape;
    const void* data = nullptr;
};

// What the header says about one tensor. `offset` is absolute in the file.
struct TensorInfo {
    std::string name;
    StDType dtype = StDType::kF32;
    Shape shape;
    std::uint64_t offset = 0;
    std::uint64_t nbytes = 0;
    std::uint64_t numel = 0;
};

// An expectation for diff_tensors: name, dtype and shape a consumer needs.
struct TensorSpec {
    std::string name;
    StDType dtype = StDType::kF32;
    Shape shape;
};

// An opened, fully validated safetensors file. The bytes are mmapped (or owned, for from_bytes); every
// accessor works on validated offsets only. Immutable after construction: safe to read from several
// threads. Movable, not copyable. The mapping assumes nobody truncates the file while it is open
// (our writers never modify a file in place: they rename a new one over it).
class SafetensorsFile {
public:
    // Opens and validates `path`. Throws IoError when it cannot be read and FormatError (naming the
    // file, the tensor and what was expected vs found) for anything malformed: short file, header
    // length beyond the file, bad JSON, unknown dtype, negative or overflowing shapes, offsets out of
    // range / overlapping / with gaps, size != shape x dtype, duplicate names, non-string metadata.
    static SafetensorsFile open(const std::filesystem::path& path);
    // Same validation on bytes in memory; `label` stands for the file name in messages.
    static SafetensorsFile from_bytes(std::string bytes, std::string label = "<memory>");

    SafetensorsFile(SafetensorsFile&&) noexcept;
    SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
    ~SafetensorsFile();

    const std::string& path() const { return label_; }
    // Tensor names in data order (the order the writer laid them out).
    std::vector<std::string> names() const;
    bool contains(std::string_view name) const;
    std::size_t size() const { return infos_.size(); }
    // Throws FormatError naming the file and the closest existing name when `name` is absent.
    const TensorInfo& info(std::string_view name) const;
    const std::map<std::string, std::string>& metadata() const { return metadata_; }

    // Raw bytes of a tensor (may be unaligned: copy with memcpy).
    const std::uint8_t* raw(std::string_view name) const;

    // Copies tensor `name` into dst as fp32, converting from F32, BF16, F16 or F64. Throws FormatError
    // when the shape differs from `expected_shape` or the dtype cannot be converted.
    void read_f32(std::string_view name, float* dst, const Shape& expected_shape) const;
    // Copies the bytes of tensor `name` into dst; its dtype and shape must equal the given ones.
    void read_exact(std::string_view name, StDType dtype, const Shape& expected_shape, void* dst) const;

private:
    SafetensorsFile() = default;
    void parse();
    const std::uint8_t* bytes() const;

    std::string label_;
    std::string owned_;                  // from_bytes
    const std::uint8_t* map_ = nullptr;  // open(): mmapped file
    std::size_t size_ = 0;
    std::vector<TensorInfo> infos_;  // data order
    std::map<std::string, std::size_t, std::less<>> index_;
    std::map<std::string, std::string> metadata_;
};

// Writes a safetensors file atomically (`path.tmp.<pid>` written, fsynced, renamed, dir fsynced).
// Layout is deterministic: tensors sorted by dtype size (largest first, so every tensor is naturally
// aligned, as the safetensors library does), then in the given order; the header is padded with
// spaces to a multiple of 8 bytes; "__metadata__" comes first in the header and holds `metadata` plus
// a CRC-32C per tensor (core/safetensors_integrity.h; verify_tensors checks them at load).
// Throws InputError for duplicate/empty names or a null data pointer, IoError on write failure.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Every difference between a file's tensors and what a consumer expects, one line each: missing
// names, unexpected names, shape mismatches, dtype mismatches (unless allow_float_conversion and both
// dtypes are among F32/BF16/F16/F64). Empty when they match.
std::vector<std::string> diff_tensors(const SafetensorsFile& file, const std::vector<TensorSpec>& expected,
                                      bool allow_float_conversion = false);

}  // namespace llmt
