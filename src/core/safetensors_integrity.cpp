// Per-tensor checksums and finiteness of safetensors files (safetensors_integrity.h). Each tensor is
// read once, in 256 KiB pieces: the CRC and the finiteness scan see the same piece while it is in cache.
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

constexpr std::size_t kPiece = 256 << 10;  // stays in L2 between the checksum and the scan

std::uint64_t byte_size(const TensorRef& t) {
    std::uint64_t n = st_dtype_size(t.dtype);
    for (auto d : t.shape) n *= static_cast<std::uint64_t>(d);
    return n;
}

// Index (in elements, from the start of the piece) of the first NaN or infinity among n elements of
// `dtype` at p, or nullopt. Integer and bool dtypes are always finite. A float is non-finite when its
// exponent field is all ones. Word-parallel on 64 bits: with `exp` the exponent mask of every lane
// and `one` the lowest exponent bit of every lane, (w & exp) + one sets a lane's top bit exactly when
// its exponent is all ones (and never carries into the next lane), so OR-ing that over a block tells
// whether the block holds a bad value; only then is it searched element by element.
struct Lanes {
    std::uint64_t exp, one, top;
    std::size_t size;  // bytes per element
};

std::optional<std::size_t> first_bad_lane(const std::uint8_t* p, std::size_t n, const Lanes& l) {
    const std::uint64_t nbytes = static_cast<std::uint64_t>(n) * l.size;
    constexpr std::size_t kBlock = 4096;  // bytes
    for (std::uint64_t start = 0; start < nbytes; start += kBlock) {
        const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(kBlock, nbytes - start));
        const std::uint8_t* q = p + start;
        std::uint64_t acc = 0, a[4] = {0, 0, 0, 0};  // four chains: the loop is not bound by one OR's latency
        std::size_t i = 0;
        for (; i + 32 <= len; i += 32) {
            std::uint64_t w[4];
            std::memcpy(w, q + i, 32);
            for (int j = 0; j < 4; ++j) a[j] |= (w[j] & l.exp) + l.one;
        }
        acc = a[0] | a[1] | a[2] | a[3];
        for (; i + 8 <= len; i += 8) {
            std::uint64_t w;
            std::memcpy(&w, q + i, 8);
            acc |= (w & l.exp) + l.one;
        }
        if (i < len) {  // a tail of whole elements; the zero padding is finite
            std::uint64_t w = 0;
            std::memcpy(&w, q + i, len - i);
            acc |= (w & l.exp) + l.one;
        }
        if ((acc & l.top) == 0) continue;
        for (std::size_t k = 0; k < len; k += l.size) {
            std::uint64_t w = 0;
            std::memcpy(&w, q + k, l.size);
            if (((w & l.exp) + l.one) & l.top) return (start + k) / l.size;
        }
    }
    return std::nullopt;
}

std::optional<std::size_t> first_non_finite(StDType dtype, const std::uint8_t* p, std::size_t n) {
    switch (dtype) {
        case StDType::kF64: return first_bad_lane(p, n, {0x7ff0000000000000ull, 0x0010000000000000ull, 1ull << 63, 8});
        case StDType::kF32:
            return first_bad_lane(p, n, {0x7f8000007f800000ull, 0x0080000000800000ull, 0x8000000080000000ull, 4});
        case StDType::kBF16:
            return first_bad_lane(p, n, {0x7f807f807f807f80ull, 0x0080008000800080ull, 0x8000800080008000ull, 2});
        case StDType::kF16:
            return first_bad_lane(p, n, {0x7c007c007c007c00ull, 0x0400040004000400ull, 0x8000800080008000ull, 2});
        // F8_E5M2 has IEEE infinities and NaNs; F8_E4M3 (the "fn" variant) has no infinity and its NaN is
        // S.1111.111, all seven low bits set, which the same test finds with a 7-bit "exponent".
        case StDType::kF8E5M2:
            return first_bad_lane(p, n, {0x7c7c7c7c7c7c7c7cull, 0x0404040404040404ull, 0x8080808080808080ull, 1});
        case StDType::kF8E4M3:
            return first_bad_lane(p, n, {0x7f7f7f7f7f7f7f7full, 0x0101010101010101ull, 0x8080808080808080ull, 1});
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
        case StDType::kF8E5M2: nan = (bits & 0x3u) != 0; neg = (bits >> 7) & 1; break;
        case StDType::kF8E4M3: nan = true; break;
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
