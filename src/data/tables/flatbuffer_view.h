// A bounds-checked view of FlatBuffers data (the encoding of Arrow IPC metadata): tables through their
// vtables, scalars, strings, vectors and unions. Reading only; every offset is checked against the
// buffer before it is followed. Errors throw FormatError "<where>: <what>".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmt::data {

class FlatTable {
public:
    // The root table of `data` (its first 4 bytes are the root offset).
    static FlatTable root(const uint8_t* data, std::size_t size, std::string_view where);

    bool has(int field) const { return field_offset(field) != 0; }
    // Scalars; `dflt` when the field is absent (FlatBuffers leaves defaults out).
    int64_t i64(int field, int64_t dflt = 0) const;
    int32_t i32(int field, int32_t dflt = 0) const;
    int16_t i16(int field, int16_t dflt = 0) const;
    uint8_t u8(int field, uint8_t dflt = 0) const;
    std::string str(int field) const;  // "" when absent
    FlatTable table(int field) const;  // throws when absent
    // A vector field: its element count and the position of element 0 (0 elements when absent).
    struct Vector {
        std::size_t pos = 0;
        std::size_t size = 0;
    };
    Vector vector(int field, std::size_t elem_bytes) const;
    // Element i of a vector of tables.
    FlatTable table_at(const Vector& v, std::size_t i) const;
    // Reads a little-endian scalar at an absolute position (vectors of structs).
    int64_t i64_at(std::size_t pos) const;

private:
    FlatTable(const uint8_t* data, std::size_t size, std::size_t pos, std::string_view where, int depth);
    uint16_t field_offset(int field) const;
    std::size_t deref(std::size_t pos) const;  // follows a uoffset at pos
    void need(std::size_t pos, std::size_t n) const;
    [[noreturn]] void fail(std::string_view what) const;

    const uint8_t* data_;
    std::size_t size_;
    std::size_t pos_;  // the table's position
    std::size_t vtable_ = 0;
    uint16_t vtable_size_ = 0;
    std::string_view where_;
    int depth_;
};

}  // namespace llmt::data
