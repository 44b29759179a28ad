// Parquet encodings (parquet_encoding.h). Bit-packed values are little-endian, least significant bit
// first; delta blocks are <min delta><bit widths><miniblocks> (Encodings.md).
#include "data/tables/parquet_encoding.h"

#include <fmt/format.h>

#include <cstring>

#include "core/error.h"

namespace llmt::data::parquet {

namespace {

constexpr std::size_t kMaxDeltaBytes = std::size_t{256} << 20;

[[noreturn]] void fail(const ByteSpan& in, std::string_view what) {
    throw FormatError(fmt::format("{}: {}", in.where, what));
}

struct Cursor {
    const ByteSpan& in;
    std::size_t pos = 0;

    std::size_t left() const { return in.size - pos; }
    uint8_t byte() {
        if (pos >= in.size) fail(in, "encoded values end early");
        return in.data[pos++];
    }
    uint64_t varint() {
        uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            const uint8_t b = byte();
            v |= static_cast<uint64_t>(b & 0x7f) << shift;
            if (!(b & 0x80)) return v;
        }
        fail(in, "varint longer than 10 bytes");
    }
    int64_t zigzag() {
        const uint64_t v = varint();
        return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
    }
};

// Reads `n` values of `width` bits (<= 64) packed LSB-first starting at bit 0 of `p`, which holds at
// least ceil(n * width / 8) bytes.
template <typename U>
void unpack_bits(const uint8_t* p, int width, std::size_t n, U* out) {
    uint64_t bit = 0;
    for (std::size_t i = 0; i < n; ++i) {
        uint64_t v = 0;
        int got = 0;
        while (got < width) {
            const uint64_t byte_index = bit >> 3;
            const int shift = static_cast<int>(bit & 7);
            const int take = std::min(8 - shift, width - got);
            const uint64_t part = (static_cast<uint64_t>(p[byte_index]) >> shift) & ((1u << take) - 1);
            v |= part << got;
            got += take;
            bit += static_cast<uint64_t>(take);
        }
        out[i] = static_cast<U>(v);
    }
}

}  // namespace

void decode_rle_hybrid(const ByteSpan& in, int bit_width, std::size_t count, std::vector<uint32_t>& out) {
    if (bit_width < 0 || bit_width > 32) fail(in, fmt::format("bit width {} is out of range 0..32", bit_width));
    const std::size_t start = out.size();
    if (bit_width == 0) {
        out.resize(start + count, 0);
        return;
    }
    Cursor c{in};
    const std::size_t value_bytes = static_cast<std::size_t>((bit_width + 7) / 8);
    while (out.size() - start < count) {
        const uint64_t header = c.varint();
        const std::size_t want = count - (out.size() - start);
        if (header & 1) {  // bit-packed groups of 8
            const uint64_t groups = header >> 1;
            if (groups == 0) fail(in, "empty bit-packed run");
            if (groups > c.left() / static_cast<uint64_t>(bit_width) + 1)
                fail(in, "bit-packed run runs past the end of its data");
            const std::size_t n = static_cast<std::size_t>(groups) * 8;
            const std::size_t bytes = static_cast<std::size_t>(groups) * static_cast<std::size_t>(bit_width);
            if (bytes > c.left()) {
                // Writers may cut the last run's padding; only the values really needed must be there.
                const std::size_t needed_bytes = (std::min(n, want) * static_cast<std::size_t>(bit_width) + 7) / 8;
                if (needed_bytes > c.left()) fail(in, "bit-packed run runs past the end of its data");
            }
            const std::size_t take = std::min(n, want);
            const std::size_t old = out.size();
            out.resize(old + take);
            unpack_bits(in.data + c.pos, bit_width, take, out.data() + old);
            c.pos += std::min(bytes, c.left());
        } else {  // one value repeated
            const uint64_t run = header >> 1;
            if (value_bytes > c.left()) fail(in, "RLE run runs past the end of its data");
            uint32_t v = 0;
            for (std::size_t b = 0; b < value_bytes; ++b) v |= static_cast<uint32_t>(c.byte()) << (8 * b);
            if (bit_width < 32 && (v >> bit_width) != 0)
                fail(in, fmt::format("RLE value {} needs more than {} bits", v, bit_width));
            const std::size_t take = static_cast<std::size_t>(std::min<uint64_t>(run, want));
            out.insert(out.end(), take, v);
        }
    }
}

std::size_t decode_delta_binary_packed(const ByteSpan& in, std::size_t max_values, std::vector<int64_t>& out) {
    Cursor c{in};
    const uint64_t block_size = c.varint();
    const uint64_t miniblocks = c.varint();
    const uint64_t total = c.varint();
    int64_t value = c.zigzag();
    if (block_size == 0 || block_size % 128 != 0 || miniblocks == 0 || block_size % miniblocks != 0 ||
        (block_size / miniblocks) % 32 != 0 || block_size > (1u << 20)) {
        fail(in, fmt::format("bad DELTA_BINARY_PACKED header (block size {}, {} miniblocks)", block_size, miniblocks));
    }
    if (total > max_values)
        fail(in, fmt::format("DELTA_BINARY_PACKED announces {} values, at most {} expected", total, max_values));
    const std::size_t per_mini = static_cast<std::size_t>(block_size / miniblocks);
    out.clear();
    out.reserve(static_cast<std::size_t>(total));
    if (total == 0) return c.pos;
    out.push_back(value);
    std::vector<uint64_t> packed(per_mini);
    std::vector<uint8_t> widths(static_cast<std::size_t>(miniblocks));
    while (out.size() < total) {
        const int64_t min_delta = c.zigzag();
        for (auto& w : widths) {
            w = c.byte();
            if (w > 64) fail(in, fmt::format("miniblock bit width {} exceeds 64", w));
        }
        for (std::size_t m = 0; m < widths.size() && out.size() < total; ++m) {
            const std::size_t bytes = per_mini * widths[m] / 8;
            if (bytes > c.left()) fail(in, "DELTA_BINARY_PACKED miniblock runs past the end of its data");
            unpack_bits(in.data + c.pos, widths[m], per_mini, packed.data());
            c.pos += bytes;
            for (std::size_t k = 0; k < per_mini && out.size() < total; ++k) {
                // Two's-complement wrap-around is how writers compute the deltas.
                value =
                    static_cast<int64_t>(static_cast<uint64_t>(value) + static_cast<uint64_t>(min_delta) + packed[k]);
                out.push_back(value);
            }
        }
    }
    return c.pos;
}

void decode_plain_byte_arrays(const ByteSpan& in, std::size_t count, std::vector<std::string_view>& out) {
    out.clear();
    if (count > in.size / 4) fail(in, fmt::format("{} PLAIN byte arrays cannot fit in {} bytes", count, in.size));
    out.reserve(count);
    std::size_t pos = 0;
    for (std::size_t i = 0; i < count; ++i) {
        if (in.size - pos < 4) fail(in, fmt::format("PLAIN value {} of {} ends early", i, count));
        uint32_t len;
        std::memcpy(&len, in.data + pos, 4);
        pos += 4;
        if (len > in.size - pos)
            fail(in, fmt::format("PLAIN value {} declares {} bytes, {} left", i, len, in.size - pos));
        out.emplace_back(reinterpret_cast<const char*>(in.data + pos), len);
        pos += len;
    }
}

void decode_delta_length_byte_arrays(const ByteSpan& in, std::size_t count, std::vector<std::string_view>& out) {
    std::vector<int64_t> lengths;
    const std::size_t used = decode_delta_binary_packed(in, count, lengths);
    if (lengths.size() != count)
        fail(in, fmt::format("DELTA_LENGTH_BYTE_ARRAY has {} lengths for {} values", lengths.size(), count));
    out.clear();
    out.reserve(count);
    std::size_t pos = used;
    for (std::size_t i = 0; i < count; ++i) {
        if (lengths[i] < 0 || static_cast<uint64_t>(lengths[i]) > in.size - pos) {
            fail(in, fmt::format("DELTA_LENGTH_BYTE_ARRAY value {} declares {} bytes, {} left", i, lengths[i],
                                 in.size - pos));
        }
        out.emplace_back(reinterpret_cast<const char*>(in.data + pos), static_cast<std::size_t>(lengths[i]));
        pos += static_cast<std::size_t>(lengths[i]);
    }
}

void decode_delta_byte_arrays(const ByteSpan& in, std::size_t count, std::string& storage,
                              std::vector<std::string_view>& out) {
    std::vector<int64_t> prefixes;
    const std::size_t used = decode_delta_binary_packed(in, count, prefixes);
    if (prefixes.size() != count)
        fail(in, fmt::format("DELTA_BYTE_ARRAY has {} prefix lengths for {} values", prefixes.size(), count));
    std::vector<std::string_view> suffixes;
    decode_delta_length_byte_arrays(ByteSpan{in.data + used, in.size - used, in.where}, count, suffixes);
    // Sizes first, so that views into `storage` stay valid (no reallocation while filling).
    std::size_t total = 0;
    std::size_t prev = 0;
    std::vector<std::size_t> sizes(count);
    for (std::size_t i = 0; i < count; ++i) {
        if (prefixes[i] < 0 || static_cast<uint64_t>(prefixes[i]) > prev) {
            fail(in, fmt::format("DELTA_BYTE_ARRAY value {} shares {} bytes with a previous value of {}", i,
                                 prefixes[i], prev));
        }
        sizes[i] = static_cast<std::size_t>(prefixes[i]) + suffixes[i].size();
        total += sizes[i];
        // Shared prefixes let a small page describe a lot of text; more than this is not a real page.
        if (total > kMaxDeltaBytes)
            fail(in, fmt::format("DELTA_BYTE_ARRAY values of a page exceed {} bytes", kMaxDeltaBytes));
        prev = sizes[i];
    }
    storage.clear();
    storage.reserve(total);
    out.clear();
    out.reserve(count);
    std::size_t prev_start = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const std::size_t start = storage.size();
        storage.append(storage, prev_start, static_cast<std::size_t>(prefixes[i]));
        storage.append(suffixes[i]);
        out.emplace_back(storage.data() + start, sizes[i]);
        prev_start = start;
    }
}

}  // namespace llmt::data::parquet
