#include "tracking/tfrecord.h"

#include <fmt/format.h>

#include <cstring>

#include "core/crc32c.h"
#include "core/error.h"

namespace llmt::tracking {

namespace {
constexpr uint32_t kMaskDelta = 0xa282ead8u;

void put_le(std::string& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(std::string_view s, size_t at, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
    return v;
}
}  // namespace

uint32_t masked_crc32c(std::string_view data) {
    const uint32_t crc = crc32c(data);
    return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

std::string tfrecord_frame(std::string_view data) {
    std::string out;
    out.reserve(data.size() + 16);
    put_le(out, data.size(), 8);
    put_le(out, masked_crc32c(std::string_view(out.data(), 8)), 4);
    out.append(data.data(), data.size());
    put_le(out, masked_crc32c(data), 4);
    return out;
}

std::vector<std::string> tfrecord_read_all(std::string_view s, const std::string& source) {
    std::vector<std::string> records;
    size_t at = 0;
    while (at + 12 <= s.size()) {
        const uint64_t len = get_le(s, at, 8);
        if (static_cast<uint32_t>(get_le(s, at + 8, 4)) != masked_crc32c(s.substr(at, 8)))
            throw FormatError(fmt::format("'{}': record {} at offset {}: the length's CRC does not match (a corrupted "
                                          "record)",
                                          source, records.size(), at));
        if (len > s.size() - at - 12 || s.size() - at - 12 - len < 4) break;  // torn tail
        const std::string_view data = s.substr(at + 12, len);
        if (static_cast<uint32_t>(get_le(s, at + 12 + len, 4)) != masked_crc32c(data))
            throw FormatError(fmt::format("'{}': record {} at offset {}: the data's CRC does not match (a corrupted "
                                          "record)",
                                          source, records.size(), at));
        records.emplace_back(data);
        at += 16 + len;
    }
    return records;
}

}  // namespace llmt::tracking
