// FlatTable (flatbuffer_view.h), following the FlatBuffers binary format: a table starts with a signed
// offset back to its vtable; the vtable holds its own size, the table's size, then one 16-bit offset
// per field (0: absent). Offsets to strings, vectors and sub-tables are unsigned and relative.
#include "data/tables/flatbuffer_view.h"

#include <fmt/format.h>

#include <cstring>

#include "core/error.h"

namespace llmt::data {

namespace {
constexpr int kMaxDepth = 64;
template <typename T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
}  // namespace

FlatTable FlatTable::root(const uint8_t* data, std::size_t size, std::string_view where) {
    if (size < 4) throw FormatError(fmt::format("{}: metadata of {} bytes is too short", where, size));
    return FlatTable(data, size, load<uint32_t>(data), where, 0);
}

FlatTable::FlatTable(const uint8_t* data, std::size_t size, std::size_t pos, std::string_view where, int depth)
    : data_(data), size_(size), pos_(pos), where_(where), depth_(depth) {
    if (depth > kMaxDepth) fail("tables nested too deeply");
    need(pos, 4);
    const int64_t vt = static_cast<int64_t>(pos) - load<int32_t>(data + pos);
    if (vt < 0 || static_cast<uint64_t>(vt) + 4 > size) fail("a table's vtable lies outside the metadata");
    vtable_ = static_cast<std::size_t>(vt);
    vtable_size_ = load<uint16_t>(data + vtable_);
    if (vtable_size_ < 4 || vtable_ + vtable_size_ > size) fail("a vtable runs past the end of the metadata");
}

void FlatTable::fail(std::string_view what) const { throw FormatError(fmt::format("{}: {}", where_, what)); }

void FlatTable::need(std::size_t pos, std::size_t n) const {
    if (pos > size_ || n > size_ - pos)
        fail(fmt::format("offset {} + {} runs past the end of the {} byte metadata", pos, n, size_));
}

uint16_t FlatTable::field_offset(int field) const {
    const std::size_t at = 4 + 2 * static_cast<std::size_t>(field);
    if (at + 2 > vtable_size_) return 0;
    const uint16_t off = load<uint16_t>(data_ + vtable_ + at);
    if (off != 0) need(pos_ + off, 1);
    return off;
}

std::size_t FlatTable::deref(std::size_t pos) const {
    need(pos, 4);
    const uint64_t target = static_cast<uint64_t>(pos) + load<uint32_t>(data_ + pos);
    if (target >= size_) fail("an offset points past the end of the metadata");
    return static_cast<std::size_t>(target);
}

int64_t FlatTable::i64(int field, int64_t dflt) const {
    const uint16_t off = field_offset(field);
    if (!off) return dflt;
    need(pos_ + off, 8);
    return load<int64_t>(data_ + pos_ + off);
}

int32_t FlatTable::i32(int field, int32_t dflt) const {
    const uint16_t off = field_offset(field);
    if (!off) return dflt;
    need(pos_ + off, 4);
    return load<int32_t>(data_ + pos_ + off);
}

int16_t FlatTable::i16(int field, int16_t dflt) const {
    const uint16_t off = field_offset(field);
    if (!off) return dflt;
    need(pos_ + off, 2);
    return load<int16_t>(data_ + pos_ + off);
}

uint8_t FlatTable::u8(int field, uint8_t dflt) const {
    const uint16_t off = field_offset(field);
    if (!off) return dflt;
    return data_[pos_ + off];
}

std::string FlatTable::str(int field) const {
    const uint16_t off = field_offset(field);
    if (!off) return {};
    const std::size_t s = deref(pos_ + off);
    need(s, 4);
    const uint32_t n = load<uint32_t>(data_ + s);
    need(s + 4, n);
    return std::string(reinterpret_cast<const char*>(data_ + s + 4), n);
}

FlatTable FlatTable::table(int field) const {
    const uint16_t off = field_offset(field);
    if (!off) fail(fmt::format("required table field {} is absent", field));
    return FlatTable(data_, size_, deref(pos_ + off), where_, depth_ + 1);
}

FlatTable::Vector FlatTable::vector(int field, std::size_t elem_bytes) const {
    const uint16_t off = field_offset(field);
    if (!off) return {};
    const std::size_t v = deref(pos_ + off);
    need(v, 4);
    const uint32_t n = load<uint32_t>(data_ + v);
    if (elem_bytes && n > (size_ - v - 4) / elem_bytes)
        fail(fmt::format("a vector of {} elements runs past the end of the metadata", n));
    return {v + 4, n};
}

FlatTable FlatTable::table_at(const Vector& v, std::size_t i) const {
    return FlatTable(data_, size_, deref(v.pos + 4 * i), where_, depth_ + 1);
}

int64_t FlatTable::i64_at(std::size_t pos) const {
    need(pos, 8);
    return load<int64_t>(data_ + pos);
}

}  // namespace llmt::data
