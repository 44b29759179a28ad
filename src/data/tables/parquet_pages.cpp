// ColumnPages (parquet_pages.h): page header, then (v1) the whole page decompressed and split into
// repetition levels, definition levels and values, or (v2) levels stored raw before the compressed
// values; dictionary pages become the chunk's dictionary.
#include "data/tables/parquet_pages.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "data/tables/page_codec.h"
#include "data/tables/parquet_encoding.h"

namespace llmt::data::parquet {

namespace {
int bit_width(int max_level) {
    int w = 0;
    while ((1 << w) <= max_level) ++w;
    return w;
}
constexpr std::size_t kFirstHeaderRead = 512;
constexpr std::size_t kMaxHeaderBytes = std::size_t{16} << 20;  // statistics can make headers large
}  // namespace

ColumnPages::ColumnPages(int fd, std::string_view file, uint64_t file_size, const ColumnChunk& chunk, const Leaf& leaf)
    : fd_(fd), file_(file), chunk_(chunk), leaf_(leaf) {
    const int64_t first = chunk.dictionary_page_offset > 0
                              ? std::min(chunk.dictionary_page_offset, chunk.data_page_offset)
                              : chunk.data_page_offset;
    if (chunk.external) fail(0, "the column chunk lives in another file (file_path), which is not supported");
    if (first < 4 || chunk.total_compressed_size < 0 || static_cast<uint64_t>(first) > file_size ||
        static_cast<uint64_t>(chunk.total_compressed_size) > file_size - static_cast<uint64_t>(first)) {
        fail(static_cast<uint64_t>(std::max<int64_t>(first, 0)),
             fmt::format("column chunk of {} bytes at byte offset {} lies outside the {} byte file",
                         chunk.total_compressed_size, first, file_size));
    }
    start_ = static_cast<uint64_t>(first);
    end_ = start_ + static_cast<uint64_t>(chunk.total_compressed_size);
}

void ColumnPages::fail(uint64_t at, std::string_view what) const {
    throw FormatError(fmt::format("{}: column '{}', page at byte offset {}: {}", file_, leaf_.path, at, what));
}

void ColumnPages::read_at(uint64_t offset, std::size_t n, std::vector<uint8_t>& out) const {
    out.resize(n);
    std::size_t got = 0;
    while (got < n) {
        const ssize_t r = ::pread(fd_, out.data() + got, n - got, static_cast<off_t>(offset + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            throw IoError(fmt::format("cannot read '{}': {}", file_, std::strerror(errno)));
        }
        if (r == 0) fail(offset, fmt::format("the file ends at byte offset {}, inside this page", offset + got));
        got += static_cast<std::size_t>(r);
    }
}

bool ColumnPages::next(LevelEntry& e) {
    while (level_pos_ >= defs_.size()) {
        if (!load_page()) {
            if (values_seen_ != chunk_.num_values) {
                fail(start_ + consumed_, fmt::format("the column chunk's pages hold {} values, its metadata says {}",
                                                     values_seen_, chunk_.num_values));
            }
            return false;
        }
    }
    e.rep = leaf_.max_rep > 0 ? reps_[level_pos_] : 0;
    e.def = defs_[level_pos_];
    ++level_pos_;
    if (static_cast<int>(e.def) == leaf_.max_def) {
        e.value = values_[value_pos_++];
    } else {
        e.value = {};
    }
    return true;
}

bool ColumnPages::load_page() {
    for (;;) {
        const uint64_t at = start_ + consumed_;
        if (at >= end_) return false;
        // The header's length is known only once it is decoded: read a little, more if it was cut.
        PageHeader h;
        std::size_t want = static_cast<std::size_t>(std::min<uint64_t>(kFirstHeaderRead, end_ - at));
        for (;;) {
            read_at(at, want, raw_);
            if (decode_page_header(raw_.data(), raw_.size(), at, file_, leaf_.path, h)) break;
            if (want == end_ - at || want >= kMaxHeaderBytes)
                fail(at, "the page header runs past the end of the column chunk");
            want = static_cast<std::size_t>(std::min<uint64_t>({want * 8, end_ - at, kMaxHeaderBytes}));
        }
        const uint64_t body_at = at + h.header_bytes;
        if (static_cast<uint64_t>(h.compressed_size) > end_ - body_at) {
            fail(at, fmt::format("page of {} compressed bytes runs past the end of the column chunk ({} bytes left)",
                                 h.compressed_size, end_ - body_at));
        }
        if (static_cast<std::size_t>(h.compressed_size) > kMaxPageBytes ||
            static_cast<std::size_t>(h.uncompressed_size) > kMaxPageBytes) {
            fail(at, fmt::format("declared page size {} / {} exceeds the {} byte limit", h.compressed_size,
                                 h.uncompressed_size, kMaxPageBytes));
        }
        read_at(body_at, static_cast<std::size_t>(h.compressed_size), raw_);
        consumed_ = body_at + static_cast<uint64_t>(h.compressed_size) - start_;
        if (h.type == kDictionaryPage) {
            read_dictionary(h, at);
            continue;
        }
        if (h.type == kDataPage || h.type == kDataPageV2) {
            read_data_page(h, at);
            return true;
        }
        // Index pages and unknown page types carry no values: skipped.
    }
}

void ColumnPages::read_dictionary(const PageHeader& h, uint64_t at) {
    if (has_dict_) fail(at, "a second dictionary page in one column chunk");
    if (h.encoding != kPlain && h.encoding != kPlainDictionary)
        fail(at, fmt::format("dictionary page encoding {} is not PLAIN", h.encoding));
    if (h.num_values < 0 || h.num_values > kMaxPageValues)
        fail(at, fmt::format("dictionary of {} values is out of range", h.num_values));
    decompress_page(chunk_.codec, raw_.data(), raw_.size(), static_cast<std::size_t>(h.uncompressed_size),
                    {file_, leaf_.path, at}, page_);
    const std::string where = fmt::format("{}: column '{}', dictionary page at byte offset {}", file_, leaf_.path, at);
    std::vector<std::string_view> views;
    decode_plain_byte_arrays(ByteSpan{page_.data(), page_.size(), where}, static_cast<std::size_t>(h.num_values),
                             views);
    // The dictionary outlives this page buffer: copy it into one string and re-point the views.
    dict_bytes_.assign(reinterpret_cast<const char*>(page_.data()), page_.size());
    dict_.clear();
    for (const auto& v : views)
        dict_.emplace_back(dict_bytes_.data() + (v.data() - reinterpret_cast<const char*>(page_.data())), v.size());
    has_dict_ = true;
}

void ColumnPages::read_data_page(const PageHeader& h, uint64_t at) {
    if (h.num_values < 0 || h.num_values > kMaxPageValues)
        fail(at, fmt::format("page announces {} values (limit {})", h.num_values, kMaxPageValues));
    const auto n = static_cast<std::size_t>(h.num_values);
    const PageLocation loc{file_, leaf_.path, at};
    const uint8_t* levels = nullptr;
    std::size_t level_bytes = 0;
    const uint8_t* values = nullptr;
    std::size_t value_bytes = 0;
    if (h.type == kDataPage) {
        decompress_page(chunk_.codec, raw_.data(), raw_.size(), static_cast<std::size_t>(h.uncompressed_size), loc,
                        page_);
        levels = page_.data();
        level_bytes = page_.size();
    } else {
        if (h.rep_bytes < 0 || h.def_bytes < 0 ||
            static_cast<uint64_t>(h.rep_bytes) + static_cast<uint64_t>(h.def_bytes) > raw_.size() ||
            static_cast<uint64_t>(h.rep_bytes) + static_cast<uint64_t>(h.def_bytes) >
                static_cast<uint64_t>(h.uncompressed_size)) {
            fail(at, fmt::format("level lengths {} + {} do not fit in the page", h.rep_bytes, h.def_bytes));
        }
        const std::size_t lb = static_cast<std::size_t>(h.rep_bytes) + static_cast<std::size_t>(h.def_bytes);
        const std::size_t declared = static_cast<std::size_t>(h.uncompressed_size) - lb;
        if (h.is_compressed && chunk_.codec != kUncompressed) {
            decompress_page(chunk_.codec, raw_.data() + lb, raw_.size() - lb, declared, loc, page_);
        } else {
            decompress_page(kUncompressed, raw_.data() + lb, raw_.size() - lb, declared, loc, page_);
        }
        levels = raw_.data();
        level_bytes = lb;
        values = page_.data();
        value_bytes = page_.size();
    }
    const std::string where = fmt::format("{}: column '{}', page at byte offset {}", file_, leaf_.path, at);
    std::size_t pos = 0;
    // v1: each level run is prefixed by its 4-byte length; v2: the header gives the lengths.
    auto level_span = [&](int32_t v2_len, std::string_view what) {
        std::size_t len;
        if (h.type == kDataPage) {
            if (level_bytes - pos < 4) fail(at, fmt::format("{} levels end early", what));
            uint32_t l;
            std::memcpy(&l, levels + pos, 4);
            pos += 4;
            len = l;
        } else {
            len = static_cast<std::size_t>(v2_len);
        }
        if (len > level_bytes - pos) fail(at, fmt::format("{} levels of {} bytes run past the page", what, len));
        ByteSpan s{levels + pos, len, where};
        pos += len;
        return s;
    };
    reps_.clear();
    defs_.clear();
    if (leaf_.max_rep > 0) {
        if (h.type == kDataPage && h.rep_encoding != kRle)
            fail(at, fmt::format("repetition level encoding {} is not RLE", h.rep_encoding));
        decode_rle_hybrid(level_span(h.rep_bytes, "repetition"), bit_width(leaf_.max_rep), n, reps_);
    }
    if (leaf_.max_def > 0) {
        if (h.type == kDataPage && h.def_encoding != kRle)
            fail(at, fmt::format("definition level encoding {} is not RLE", h.def_encoding));
        decode_rle_hybrid(level_span(h.def_bytes, "definition"), bit_width(leaf_.max_def), n, defs_);
    } else {
        defs_.assign(n, 0);
    }
    if (h.type == kDataPage) {
        values = levels + pos;
        value_bytes = level_bytes - pos;
    }
    std::size_t present = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (defs_[i] > static_cast<uint32_t>(leaf_.max_def) ||
            (leaf_.max_rep > 0 && reps_[i] > static_cast<uint32_t>(leaf_.max_rep))) {
            fail(at, fmt::format("level {} is out of range (max definition {}, repetition {})", defs_[i],
                                 leaf_.max_def, leaf_.max_rep));
        }
        present += defs_[i] == static_cast<uint32_t>(leaf_.max_def);
    }
    decode_values(h.encoding, values, value_bytes, present, at);
    level_pos_ = 0;
    value_pos_ = 0;
    values_seen_ += h.num_values;
}

void ColumnPages::decode_values(int32_t encoding, const uint8_t* p, std::size_t n, std::size_t count, uint64_t at) {
    const std::string where = fmt::format("{}: column '{}', page at byte offset {}", file_, leaf_.path, at);
    const ByteSpan span{p, n, where};
    switch (encoding) {
        case kPlain: decode_plain_byte_arrays(span, count, values_); return;
        case kDeltaLengthByteArray: decode_delta_length_byte_arrays(span, count, values_); return;
        case kDeltaByteArray: decode_delta_byte_arrays(span, count, delta_storage_, values_); return;
        case kPlainDictionary:
        case kRleDictionary: {
            if (!has_dict_) fail(at, "dictionary-encoded page without a dictionary page");
            values_.clear();
            if (count == 0) return;
            if (n < 1) fail(at, "dictionary indices end early");
            indices_.clear();
            decode_rle_hybrid(ByteSpan{p + 1, n - 1, where}, p[0], count, indices_);
            values_.reserve(count);
            for (uint32_t i : indices_) {
                if (i >= dict_.size())
                    fail(at, fmt::format("dictionary index {} is out of range (dictionary of {})", i, dict_.size()));
                values_.push_back(dict_[i]);
            }
            return;
        }
        default:
            fail(at, fmt::format("value encoding {} is not supported for strings: expected PLAIN, dictionary, "
                                 "DELTA_LENGTH_BYTE_ARRAY or DELTA_BYTE_ARRAY",
                                 encoding));
    }
}

}  // namespace llmt::data::parquet
