// TFRecord framing, the container of TensorBoard event files: each record is
//   uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
// little-endian, where masked_crc(x) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 over CRC-32C
// (tensorflow/core/lib/hash/crc32c.h, tensorflow/tsl/lib/io/record_writer.cc). docs/tracking.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llmt::tracking {

uint32_t masked_crc32c(std::string_view data);

// The framed record of `data`.
std::string tfrecord_frame(std::string_view data);

// The records of a TFRecord stream, in order; a truncated tail (a writer that died mid-record) ends the
// list. Throws FormatError naming `source`, the record index and the byte offset when a CRC does not
// match (a corrupted record).
std::vector<std::string> tfrecord_read_all(std::string_view stream, const std::string& source);

}  // namespace llmt::tracking
