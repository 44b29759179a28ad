// Parquet encodings (src/data/tables/parquet_encoding.h) on the Parquet format specification's own examples
// (Encodings.md: the RLE / bit-packing hybrid's 0..7 at bit width 3, DELTA_BINARY_PACKED), the
// Thrift compact reader on hand-made bytes, and random bytes: every decoder returns or throws
// FormatError, never reads past its span (checked by ASan in the fuzz build).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/tables/parquet_encoding.h"
#include "data/tables/thrift_compact.h"

namespace llmt::data::parquet {
namespace {

ByteSpan span(const std::vector<uint8_t>& b) { return {b.data(), b.size(), "test"}; }

TEST(ParquetEncoding, RleHybridSpecExampleAndRuns) {
    // One bit-packed group of 8 values at width 3 (the spec's example bytes), then an RLE run of 5 x 4.
    const std::vector<uint8_t> b = {0x03, 0x88, 0xC6, 0xFA, 0x0A, 0x04};
    std::vector<uint32_t> out;
    decode_rle_hybrid(span(b), 3, 13, out);
    EXPECT_EQ(out, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 4, 4, 4, 4, 4}));
    out.clear();
    EXPECT_THROW(decode_rle_hybrid(span(b), 3, 14, out), FormatError) << "the runs end before 14 values";
    out.clear();
    EXPECT_THROW(decode_rle_hybrid(span({0x02, 0x09}), 3, 1, out), FormatError) << "9 does not fit in 3 bits";
}

TEST(ParquetEncoding, DeltaBinaryPackedConstantAndMixedDeltas) {
    std::vector<int64_t> v;
    // 1..5: min delta 1, every miniblock width 0 (no packed bytes).
    decode_delta_binary_packed(span({0x80, 0x01, 0x04, 0x05, 0x02, 0x02, 0, 0, 0, 0}), 100, v);
    EXPECT_EQ(v, (std::vector<int64_t>{1, 2, 3, 4, 5}));
    // 7 5 3 1 2 3 4 5: min delta -2, adjusted 0 0 0 3 3 3 3 at width 2 in the first miniblock.
    std::vector<uint8_t> b = {0x80, 0x01, 0x04, 0x08, 14, 3, 2, 0, 0, 0, 0xC0, 0x3F, 0, 0, 0, 0, 0, 0};
    decode_delta_binary_packed(span(b), 100, v);
    EXPECT_EQ(v, (std::vector<int64_t>{7, 5, 3, 1, 2, 3, 4, 5}));
    EXPECT_THROW(decode_delta_binary_packed(span(b), 7, v), FormatError) << "more values than the caller allows";
    b.resize(12);
    EXPECT_THROW(decode_delta_binary_packed(span(b), 100, v), FormatError) << "miniblock cut short";
}

TEST(ParquetEncoding, ByteArraysPlainAndDelta) {
    std::vector<std::string_view> out;
    const std::vector<uint8_t> plain = {2, 0, 0, 0, 'h', 'i', 0, 0, 0, 0, 1, 0, 0, 0, 'x'};
    decode_plain_byte_arrays(span(plain), 3, out);
    EXPECT_EQ(out, (std::vector<std::string_view>{"hi", "", "x"}));
    EXPECT_THROW(decode_plain_byte_arrays(span(plain), 4, out), FormatError);
    // DELTA_BYTE_ARRAY "abc", "abd", "b": prefixes 0 2 0, suffixes "abc" "d" "b".
    // Prefixes 0 2 0: deltas +2 -2, min delta -2, adjusted 4 0 at width 3 -> 0x04 in the first byte.
    std::vector<uint8_t> d = {0x80, 0x01, 0x04, 0x03, 0x00, 0x03, 3, 0, 0, 0, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    // Suffix lengths 3 1 1: first 3, deltas -2 0 -> min -2, adjusted 0 2 at width 2 -> 0b1000 = 0x08.
    const std::vector<uint8_t> lengths = {0x80, 0x01, 0x04, 0x03, 0x06, 0x03, 2, 0, 0, 0, 0x08, 0, 0, 0, 0, 0, 0, 0};
    d.insert(d.end(), lengths.begin(), lengths.end());
    for (char c : std::string("abcdb")) d.push_back(static_cast<uint8_t>(c));
    std::string storage;
    decode_delta_byte_arrays(span(d), 3, storage, out);
    EXPECT_EQ(out, (std::vector<std::string_view>{"abc", "abd", "b"}));
}

TEST(ParquetEncoding, RandomBytesOnlyThrowFormatError) {
    std::mt19937 rng(1);
    for (int i = 0; i < 3000; ++i) {
        std::vector<uint8_t> b(rng() % 64);
        for (auto& x : b) x = static_cast<uint8_t>(rng());
        std::vector<uint32_t> levels;
        std::vector<int64_t> ints;
        std::vector<std::string_view> strs;
        std::string storage;
        try {
            decode_rle_hybrid(span(b), static_cast<int>(rng() % 33), rng() % 100, levels);
        } catch (const FormatError&) {
        }
        try { decode_delta_binary_packed(span(b), 1000, ints); } catch (const FormatError&) {}
        try { decode_delta_length_byte_arrays(span(b), rng() % 20, strs); } catch (const FormatError&) {}
        try { decode_delta_byte_arrays(span(b), rng() % 20, storage, strs); } catch (const FormatError&) {}
        try {
            ThriftReader r(b.data(), b.size(), 0, "random", "a struct");
            r.skip(ThriftType::kStruct);
        } catch (const FormatError&) {}
    }
}

TEST(ThriftCompact, FieldsListsAndLimits) {
    // struct { 1: i32 -3, 4: string "ab", 5: list<i64> [1, 2] }, STOP
    const std::vector<uint8_t> b = {0x15, 0x05, 0x38, 0x02, 'a', 'b', 0x19, 0x26, 0x02, 0x04, 0x00};
    ThriftReader r(b.data(), b.size(), 100, "f", "test struct");
    r.begin_struct();
    ThriftField f;
    ASSERT_TRUE(r.next_field(f));
    EXPECT_EQ(f.id, 1);
    EXPECT_EQ(r.read_i32(), -3);
    ASSERT_TRUE(r.next_field(f));
    EXPECT_EQ(f.id, 4);
    EXPECT_EQ(r.read_binary(), "ab");
    ASSERT_TRUE(r.next_field(f));
    EXPECT_EQ(f.id, 5);
    const ThriftList l = r.read_list_header();
    EXPECT_EQ(l.size, 2u);
    EXPECT_EQ(r.read_i64(), 1);
    EXPECT_EQ(r.read_i64(), 2);
    EXPECT_FALSE(r.next_field(f));
    // A list claiming more elements than bytes remain is refused before anything is reserved.
    const std::vector<uint8_t> huge = {0xF6, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F};
    ThriftReader h(huge.data(), huge.size(), 7, "g.parquet", "footer");
    try {
        h.read_list_header();
        FAIL() << "no error";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("g.parquet: byte offset 13: list of 4294967295 elements"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace llmt::data::parquet
