// A reader for the Thrift compact protocol, the encoding of Parquet's footer and page headers
// (docs/data.md "Parquet"). Only reading, only what Parquet's metadata uses, every length checked
// against the bytes that are there before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmt::data {

// Compact protocol type codes (the low nibble of a field header).
enum class ThriftType : uint8_t {
    kStop = 0,
    kTrue = 1,
    kFalse = 2,
    kByte = 3,
    kI16 = 4,
    kI32 = 5,
    kI64 = 6,
    kDouble = 7,
    kBinary = 8,
    kList = 9,
    kSet = 10,
    kMap = 11,
    kStruct = 12,
};

struct ThriftField {
    int16_t id = 0;
    ThriftType type = ThriftType::kStop;
};

struct ThriftList {
    ThriftType elem = ThriftType::kStop;
    uint32_t size = 0;
};

// Reads compact-protocol values from bytes [data, data + size) that sit at byte `base` of `file`.
// Errors throw FormatError "<file>: byte offset N: <what> (while reading <context>)"; a read past the
// end of the bytes given sets truncated() before throwing, so a caller holding only part of a page
// header can fetch more and retry. Not thread-safe.
class ThriftReader {
public:
    ThriftReader(const uint8_t* data, std::size_t size, uint64_t base, std::string_view file,
                 std::string_view context);

    // Struct scope: field ids are deltas from the previous field of the same struct.
    void begin_struct();
    void end_struct();
    // The next field header; false at the struct's STOP byte.
    bool next_field(ThriftField& f);

    bool read_bool(const ThriftField& f);  // a bool field's value lives in its header type
    int32_t read_i32();
    int64_t read_i64();
    std::string read_binary();
    ThriftList read_list_header();  // size checked against the bytes left (an element is >= 1 byte)
    // Skips a value of any type (nested up to 32 deep).
    void skip(ThriftType t);

    std::size_t position() const { return pos_; }       // bytes consumed
    uint64_t offset() const { return base_ + pos_; }    // file offset of the next byte
    bool truncated() const { return truncated_; }

    [[noreturn]] void fail(std::string_view what) const;

private:
    uint64_t read_varint();
    uint8_t read_byte();
    void skip_value(ThriftType t, int depth);

    const uint8_t* data_;
    std::size_t size_;
    std::size_t pos_ = 0;
    uint64_t base_;
    std::string_view file_;
    std::string_view context_;
    int16_t last_id_ = 0;
    int16_t saved_ids_[40] = {};
    int depth_ = 0;
    bool truncated_ = false;
};

}  // namespace llmt::data
