#include "tracking/proto_writer.h"

#include <cstring>

namespace llmt::tracking {

void ProtoWriter::raw_varint(uint64_t v) {
    while (v >= 0x80) {
        out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
        v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
}

void ProtoWriter::tag(int field, int wire_type) {
    raw_varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

void ProtoWriter::varint(int field, uint64_t v) {
    tag(field, 0);
    raw_varint(v);
}

// Fixed-width values are little-endian on the wire, as they are in memory on the x86-64 and aarch64
// machines llmtrain builds for.
void ProtoWriter::fixed64_double(int field, double v) {
    static_assert(sizeof(double) == 8);
    tag(field, 1);
    char b[8];
    std::memcpy(b, &v, 8);
    out_.append(b, 8);
}

void ProtoWriter::fixed32_float(int field, float v) {
    static_assert(sizeof(float) == 4);
    tag(field, 5);
    char b[4];
    std::memcpy(b, &v, 4);
    out_.append(b, 4);
}

void ProtoWriter::bytes(int field, std::string_view v) {
    tag(field, 2);
    raw_varint(v.size());
    out_.append(v.data(), v.size());
}

}  // namespace llmt::tracking
