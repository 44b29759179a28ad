// A protobuf wire-format encoder for the few fields TensorBoard's Event and Summary messages need
// (https://protobuf.dev/programming-guides/encoding/): varints, 32/64-bit fixed values and
// length-delimited strings and sub-messages. Written by hand instead of linking libprotobuf: five
// message types and a dozen fields do not earn a code generator and a runtime (docs/architecture.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace llmt::tracking {

// Appends fields to one serialized message. Not thread-safe; a value type.
class ProtoWriter {
public:
    void varint(int field, uint64_t v);          // wire type 0: int32/int64 (non-negative), enum, bool
    void fixed64_double(int field, double v);    // wire type 1: double
    void fixed32_float(int field, float v);      // wire type 5: float
    void bytes(int field, std::string_view v);   // wire type 2: string, bytes, sub-message
    void message(int field, const ProtoWriter& m) { bytes(field, m.data()); }

    const std::string& data() const { return out_; }

private:
    void tag(int field, int wire_type);
    void raw_varint(uint64_t v);
    std::string out_;
};

}  // namespace llmt::tracking
