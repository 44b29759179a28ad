// Parquet value and level encodings (the Parquet format's Encodings.md): the RLE / bit-packing hybrid
// (levels, dictionary indices), DELTA_BINARY_PACKED integers, and byte arrays stored PLAIN,
// DELTA_LENGTH_BYTE_ARRAY or DELTA_BYTE_ARRAY. Decoders read a bounded span and throw FormatError
// ("<where>: <what>") on anything that does not fit; they never allocate more than the span implies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmt::data::parquet {

// A span of encoded bytes and a description of where it is, for error messages.
struct ByteSpan {
    const uint8_t* data = nullptr;
    std::size_t size = 0;
    std::string_view where;  // e.g. "f.parquet: column 'text', page at byte offset 4"
};

// Decodes `count` values of `bit_width` bits from an RLE / bit-packed hybrid run sequence into `out`
// (appended). bit_width 0 gives zeros. Throws when the runs end early or a value needs more bits.
void decode_rle_hybrid(const ByteSpan& in, int bit_width, std::size_t count, std::vector<uint32_t>& out);

// DELTA_BINARY_PACKED: decodes every value the header announces (at most `max_values`, which bounds
// the allocation) and returns the bytes consumed.
std::size_t decode_delta_binary_packed(const ByteSpan& in, std::size_t max_values, std::vector<int64_t>& out);

// Byte-array values of one page, as views into `storage` or into the page (kept alive by the caller).
// `count` is the number of non-null values the levels announced.
void decode_plain_byte_arrays(const ByteSpan& in, std::size_t count, std::vector<std::string_view>& out);
void decode_delta_length_byte_arrays(const ByteSpan& in, std::size_t count, std::vector<std::string_view>& out);
// DELTA_BYTE_ARRAY values are rebuilt from prefixes, so they are copied into `storage` (cleared first).
void decode_delta_byte_arrays(const ByteSpan& in, std::size_t count, std::string& storage,
                              std::vector<std::string_view>& out);

}  // namespace llmt::data::parquet
