// ThriftReader (thrift_compact.h): varints, zigzag integers, field headers, lists and skipping,
// following the Thrift compact protocol specification.
#include "data/tables/thrift_compact.h"

#include <fmt/format.h>

#include "core/error.h"

namespace llmt::data {

namespace {
int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }
constexpr int kMaxDepth = 32;
}  // namespace

ThriftReader::ThriftReader(const uint8_t* data, std::size_t size, uint64_t base, std::string_view file,
                           std::string_view context)
    : data_(data), size_(size), base_(base), file_(file), context_(context) {}

void ThriftReader::fail(std::string_view what) const {
    throw FormatError(fmt::format("{}: byte offset {}: {} (while reading {})", file_, offset(), what, context_));
}

uint8_t ThriftReader::read_byte() {
    if (pos_ >= size_) {
        truncated_ = true;
        fail("unexpected end of data");
    }
    return data_[pos_++];
}

uint64_t ThriftReader::read_varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        const uint8_t b = read_byte();
        v |= static_cast<uint64_t>(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
}

void ThriftReader::begin_struct() {
    if (depth_ >= kMaxDepth) fail(fmt::format("structs nested deeper than {}", kMaxDepth));
    saved_ids_[depth_++] = last_id_;
    last_id_ = 0;
}

void ThriftReader::end_struct() {
    if (depth_ > 0) last_id_ = saved_ids_[--depth_];
}

bool ThriftReader::next_field(ThriftField& f) {
    const uint8_t b = read_byte();
    const auto type = static_cast<ThriftType>(b & 0x0f);
    if (type == ThriftType::kStop) return false;
    if (static_cast<uint8_t>(type) > static_cast<uint8_t>(ThriftType::kStruct))
        fail(fmt::format("unknown field type {}", b & 0x0f));
    const int delta = b >> 4;
    if (delta != 0) {
        f.id = static_cast<int16_t>(last_id_ + delta);
    } else {
        f.id = static_cast<int16_t>(unzigzag(read_varint()));
    }
    f.type = type;
    last_id_ = f.id;
    return true;
}

bool ThriftReader::read_bool(const ThriftField& f) {
    if (f.type == ThriftType::kTrue) return true;
    if (f.type == ThriftType::kFalse) return false;
    fail(fmt::format("field {} should be a bool", f.id));
}

int32_t ThriftReader::read_i32() {
    const int64_t v = unzigzag(read_varint());
    if (v < INT32_MIN || v > INT32_MAX) fail("i32 value out of range");
    return static_cast<int32_t>(v);
}

int64_t ThriftReader::read_i64() { return unzigzag(read_varint()); }

std::string ThriftReader::read_binary() {
    const uint64_t n = read_varint();
    if (n > size_ - pos_) {
        truncated_ = true;
        fail(fmt::format("string of {} bytes runs past the end of the data ({} bytes left)", n, size_ - pos_));
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
}

ThriftList ThriftReader::read_list_header() {
    const uint8_t b = read_byte();
    ThriftList l;
    l.elem = static_cast<ThriftType>(b & 0x0f);
    uint64_t n = b >> 4;
    if (n == 15) n = read_varint();
    // Every element takes at least one byte, so a larger count cannot be real.
    if (n > size_ - pos_) {
        truncated_ = true;
        fail(fmt::format("list of {} elements cannot fit in the {} bytes left", n, size_ - pos_));
    }
    l.size = static_cast<uint32_t>(n);
    return l;
}

void ThriftReader::skip(ThriftType t) { skip_value(t, 0); }

void ThriftReader::skip_value(ThriftType t, int depth) {
    if (depth > kMaxDepth) fail(fmt::format("values nested deeper than {}", kMaxDepth));
    switch (t) {
        case ThriftType::kTrue:
        case ThriftType::kFalse:
            return;  // a field's bool is in its header
        case ThriftType::kByte:
            read_byte();
            return;
        case ThriftType::kI16:
        case ThriftType::kI32:
        case ThriftType::kI64:
            read_varint();
            return;
        case ThriftType::kDouble:
            for (int i = 0; i < 8; ++i) read_byte();
            return;
        case ThriftType::kBinary: {
            const uint64_t n = read_varint();
            if (n > size_ - pos_) {
                truncated_ = true;
                fail("binary value runs past the end of the data");
            }
            pos_ += static_cast<std::size_t>(n);
            return;
        }
        case ThriftType::kList:
        case ThriftType::kSet: {
            const ThriftList l = read_list_header();
            for (uint32_t i = 0; i < l.size; ++i) {
                // Bools inside a list are one byte each.
                if (l.elem == ThriftType::kTrue || l.elem == ThriftType::kFalse) {
                    read_byte();
                } else {
                    skip_value(l.elem, depth + 1);
                }
            }
            return;
        }
        case ThriftType::kMap: {
            const uint64_t n = read_varint();
            if (n == 0) return;
            if (n > size_ - pos_) {
                truncated_ = true;
                fail("map runs past the end of the data");
            }
            const uint8_t kv = read_byte();
            for (uint64_t i = 0; i < n; ++i) {
                skip_value(static_cast<ThriftType>(kv >> 4), depth + 1);
                skip_value(static_cast<ThriftType>(kv & 0x0f), depth + 1);
            }
            return;
        }
        case ThriftType::kStruct: {
            begin_struct();
            ThriftField f;
            while (next_field(f)) skip_value(f.type, depth + 1);
            end_struct();
            return;
        }
        case ThriftType::kStop:
            break;
    }
    fail(fmt::format("cannot skip a value of type {}", static_cast<int>(t)));
}

}  // namespace llmt::data
