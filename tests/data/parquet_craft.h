// Builds small Parquet files byte by byte for the malformed-input tests: a Thrift compact writer and
// a one-column (optional BYTE_ARRAY "text") file with one v1 data page whose body, codec and declared
// sizes the test chooses, so a page can lie about its size or hold a decompression bomb.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace llmt::data::testing {

class CompactWriter {
public:
    std::string out;

    void varint(uint64_t v) {
        while (v >= 0x80) {
            out += static_cast<char>((v & 0x7f) | 0x80);
            v >>= 7;
        }
        out += static_cast<char>(v);
    }
    void zigzag(int64_t v) { varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
    void field(int id, int type) {
        const int delta = id - last_.back();
        if (delta > 0 && delta <= 15) {
            out += static_cast<char>((delta << 4) | type);
        } else {
            out += static_cast<char>(type);
            zigzag(id);
        }
        last_.back() = id;
    }
    void i32(int id, int32_t v) { field(id, 5), zigzag(v); }
    void i64(int id, int64_t v) { field(id, 6), zigzag(v); }
    void binary(int id, const std::string& s) { field(id, 8), varint(s.size()), out += s; }
    void begin(int id) { field(id, 12), last_.push_back(0); }  // a struct field
    void begin_elem() { last_.push_back(0); }                   // a struct inside a list
    void end() { out += '\0', last_.pop_back(); }
    void list(int id, int elem_type, std::size_t n) {
        field(id, 9);
        if (n < 15) {
            out += static_cast<char>((n << 4) | static_cast<std::size_t>(elem_type));
        } else {
            out += static_cast<char>(0xf0 | elem_type);
            varint(n);
        }
    }

private:
    std::vector<int> last_{0};
};

// A v1 data page of PLAIN strings, all present, for an optional column (definition levels first).
inline std::string plain_page_body(const std::vector<std::string>& values) {
    std::string levels;
    levels += static_cast<char>(values.size() << 1);  // one RLE run (fewer than 64 values)
    levels += '\1';
    std::string body;
    const uint32_t n = static_cast<uint32_t>(levels.size());
    body.append(reinterpret_cast<const char*>(&n), 4);
    body += levels;
    for (const auto& v : values) {
        const uint32_t len = static_cast<uint32_t>(v.size());
        body.append(reinterpret_cast<const char*>(&len), 4);
        body += v;
    }
    return body;
}

struct CraftedPage {
    int32_t codec = 0;          // 0 none, 1 snappy, 2 gzip, 6 zstd
    std::string body;           // the page bytes as stored (compressed with `codec`)
    int64_t declared_uncompressed = -1;  // -1: body.size()
    int32_t num_values = 0;
};

// "PAR1", the page header and body, FileMetaData, footer length, "PAR1".
inline std::string craft_parquet(const CraftedPage& p) {
    CompactWriter h;
    h.i32(1, 0);  // DATA_PAGE
    h.i32(2, static_cast<int32_t>(p.declared_uncompressed < 0 ? static_cast<int64_t>(p.body.size())
                                                              : p.declared_uncompressed));
    h.i32(3, static_cast<int32_t>(p.body.size()));
    h.begin(5);
    h.i32(1, p.num_values);
    h.i32(2, 0);  // PLAIN
    h.i32(3, 3);  // RLE
    h.i32(4, 3);
    h.end();
    h.out += '\0';
    const std::string chunk = h.out + p.body;

    CompactWriter m;
    m.i32(1, 1);
    m.list(2, 12, 2);
    m.begin_elem();
    m.binary(4, "schema");
    m.i32(5, 1);
    m.end();
    m.begin_elem();
    m.i32(1, 6);  // BYTE_ARRAY
    m.i32(3, 1);  // OPTIONAL
    m.binary(4, "text");
    m.i32(6, 0);  // UTF8
    m.end();
    m.i64(3, p.num_values);
    m.list(4, 12, 1);
    m.begin_elem();
    m.list(1, 12, 1);
    m.begin_elem();
    m.i64(2, 4);
    m.begin(3);
    m.i32(1, 6);
    m.list(2, 5, 1);
    m.zigzag(0);
    m.list(3, 8, 1);
    m.varint(4);
    m.out += "text";
    m.i32(4, p.codec);
    m.i64(5, p.num_values);
    m.i64(6, static_cast<int64_t>(chunk.size()));
    m.i64(7, static_cast<int64_t>(chunk.size()));
    m.i64(9, 4);
    m.end();
    m.end();
    m.i64(2, static_cast<int64_t>(chunk.size()));
    m.i64(3, p.num_values);
    m.end();
    m.out += '\0';

    std::string file = "PAR1" + chunk + m.out;
    const uint32_t len = static_cast<uint32_t>(m.out.size());
    file.append(reinterpret_cast<const char*>(&len), 4);
    return file + "PAR1";
}

}  // namespace llmt::data::testing
