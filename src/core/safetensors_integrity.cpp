// Per-tensor checksums and finiteness of safetensors files (safetensors_integrity.h). Each tensor is
// read once, in 1 MiB pieces: the CRC and the finiteness scan see the same piece while it is in cache.
#include "core/safetensors_integrity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/safetensors.h"

namespace llmt {
namespace {

constexpr std::size_t kPiece = 1 << 20;

std::uint64_t byte_size(const TensorRef& t) {
    std::uint64_t n = st_dtype_size(t.dtype);
    for (auto d : t.shape) n *= static_cast<std::uint64_t>(d);
    return n;
}

// Index (in elements, from the start of the piece) of the first NaN or infinity among n elements of
// `dtype` at p, or nullopt. Integer and bool dtypes are always finite. An exponent field of all ones
// is what makes IEEE values non-finite: checked on the bits, so the loop vectorises.
template <typename Bits>
std::optional<std::size_t> first_all_ones(const std::uint8_t* p, std::size_t n, Bits exp_mask) {
    constexpr std::size_t kLanes = 256;
    for (std::size_t i = 0; i < n; i += kLanes) {
        const std::size_t m = std::min(kLanes, n - i);
        Bits w[kLanes];
        std::memcpy(w, p + i * sizeof(Bits), m * sizeof(Bits));
        bool any = false;
        for (std::size_t k = 0; k < m; ++k) any |= (w[k] & exp_mask) == exp_mask;
        if (!any) continue;
        for (std::size_t k = 0; k < m; ++k)
            if ((w[k] & exp_mask) == exp_mask) return i + k;
    }
    return std::nullopt;
}

std::optional<std::size_t> first_non_finite(StDType dtype, const std::uint8_t* p, std::size_t n) {
    switch (dtype) {
        case StDType::kF64: return first_all_ones<std::uint64_t>(p, n, 0x7ff0000000000000ull);
        case StDType::kF32: return first_all_ones<std::uint32_t>(p, n, 0x7f800000u);
        case StDType::kBF16: return first_all_ones<std::uint16_t>(p, n, 0x7f80u);
        case StDType::kF16: return first_all_ones<std::uint16_t>(p, n, 0x7c00u);
        default: return std::nullopt;
    }
}

// The value at a bad index, for the message ("nan", "inf", "-inf").
std::string describe_value(StDType dtype, const std::uint8_t* p) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, p, st_dtype_size(dtype));
    bool nan = false, neg = false;
    switch (dtype) {
        case StDType::kF64: nan = (bits & 0xfffffffffffffull) != 0; neg = bits >> 63; break;
        case StDType::kF32: nan = (bits & 0x7fffffu) != 0; neg = (bits >> 31) & 1; break;
        case StDType::kBF16: nan = (bits & 0x7fu) != 0; neg = (bits >> 15) & 1; break;
        default: nan = (bits & 0x3ffu) != 0; neg = (bits >> 15) & 1; break;
    }
    return nan ? "nan" : neg ? "-inf" : "inf";
}

}  // namespace

std::string checksum_key(std::string_view tensor_name) {
    return std::string(kChecksumKeyPrefix) + std::string(tensor_name);
}

std::map<std::string, std::string> with_checksums(const std::vector<TensorRef>& tensors,
                                                  std::map<std::string, std::string> metadata) {
    for (const TensorRef& t : tensors) {
        const std::uint64_t n = byte_size(t);
        metadata[checksum_key(t.name)] = crc32c_text(n > 0 ? crc32c(t.data, n) : 0u);
    }
    return metadata;
}

bool has_checksums(const SafetensorsFile& file) {
    auto it = file.metadata().lower_bound(std::string(kChecksumKeyPrefix));
    return it != file.metadata().end() && it->first.compare(0, kChecksumKeyPrefix.size(), kChecksumKeyPrefix) == 0;
}

void verify_tensors(const SafetensorsFile& file, Checksums policy) {
    // Entries first: a malformed one, or one naming no tensor, means a damaged header.
    for (const auto& [key, value] : file.metadata()) {
        if (key.compare(0, kChecksumKeyPrefix.size(), kChecksumKeyPrefix) != 0) continue;
        const std::string name = key.substr(kChecksumKeyPrefix.size());
        std::uint32_t crc = 0;
        if (!parse_crc32c_text(value, &crc)) {
            throw FormatError(fmt::format("'{}': metadata '{}' is '{}', expected 'crc32c:' and 8 hex digits",
                                          file.path(), key, value.substr(0, 40)));
        }
        if (!file.contains(name)) {
            throw FormatError(fmt::format("'{}': metadata '{}' records a checksum for tensor '{}', which the file "
                                          "does not hold (the header is damaged)",
                                          file.path(), key, name));
        }
    }
    for (const std::string& name : file.names()) {
        const TensorInfo& t = file.info(name);
        auto rec = file.metadata().find(checksum_key(name));
        if (rec == file.metadata().end() && policy == Checksums::kRequired) {
            throw FormatError(fmt::format("'{}': tensor '{}' has no checksum ('{}' missing from __metadata__); every "
                                          "tensor of an llmtrain checkpoint has one, so the header is damaged",
                                          file.path(), name, checksum_key(name)));
        }
        const std::uint8_t* p = file.raw(name);
        const std::size_t esize = st_dtype_size(t.dtype);
        const std::size_t piece = kPiece / esize * esize;
        std::uint32_t crc = 0;
        for (std::uint64_t off = 0; off < t.nbytes; off += piece) {
            const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(piece, t.nbytes - off));
            crc = crc32c_extend(crc, p + off, n);
            if (auto bad = first_non_finite(t.dtype, p + off, n / esize)) {
                const std::uint64_t index = off / esize + *bad;
                throw FormatError(fmt::format(
                    "'{}': tensor '{}' ({} {}) holds a non-finite value ({}) at flat index {}: the file is corrupt "
                    "or the run had diverged when it was saved (hint: load an earlier checkpoint)",
                    file.path(), name, st_dtype_name(t.dtype), shape_str(t.shape),
                    describe_value(t.dtype, p + index * esize), index));
            }
        }
        if (rec == file.metadata().end()) continue;
        std::uint32_t want = 0;
        parse_crc32c_text(rec->second, &want);
        if (crc != want) {
            throw FormatError(fmt::format("'{}': tensor '{}' fails its checksum (recorded {}, computed {}): the "
                                          "file is corrupt (hint: load an earlier checkpoint)",
                                          file.path(), name, crc32c_text(want), crc32c_text(crc)));
        }
    }
}

}  // namespace llmt
