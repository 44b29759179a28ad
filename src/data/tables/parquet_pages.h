// The pages of one Parquet column chunk, read one page at a time with pread and decoded into
// (repetition level, definition level, value) entries. Holds one page and the chunk's dictionary.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/tables/parquet_meta.h"

namespace llmt::data::parquet {

// A leaf column's place in the schema.
struct Leaf {
    std::string path;  // dotted path_in_schema, for messages
    int32_t type = -1;
    int max_def = 0;
    int max_rep = 0;
    int repeated_def = 0;  // definition level at the (single) repeated ancestor, when max_rep == 1
};

struct LevelEntry {
    uint32_t rep = 0;
    uint32_t def = 0;
    std::string_view value;  // set when def == max_def; valid until the next call to next()
};

// Most values (levels) one page may announce: bounds the level arrays of a page whose RLE runs
// claim millions of nulls in a few bytes (about 28 MB of levels, indices and views at most). Writers
// stop a page at 20,000 rows by default (pyarrow, parquet-mr), far below this.
inline constexpr int32_t kMaxPageValues = 1 << 20;

// Reads one BYTE_ARRAY column chunk. Throws FormatError "<file>: column '<path>', page at byte
// offset N: ..." for a malformed page. Not thread-safe; `fd` must outlive it.
class ColumnPages {
public:
    ColumnPages(int fd, std::string_view file, uint64_t file_size, const ColumnChunk& chunk, const Leaf& leaf);

    // The next entry; false at the end of the chunk (after checking the value count).
    bool next(LevelEntry& e);
    uint64_t bytes_read() const { return consumed_; }

private:
    bool load_page();
    void read_at(uint64_t offset, std::size_t n, std::vector<uint8_t>& out) const;
    void read_dictionary(const PageHeader& h, uint64_t at);
    void read_data_page(const PageHeader& h, uint64_t at);
    void decode_values(int32_t encoding, const uint8_t* p, std::size_t n, std::size_t count, uint64_t at);
    [[noreturn]] void fail(uint64_t at, std::string_view what) const;

    int fd_;
    std::string file_;
    const ColumnChunk& chunk_;
    Leaf leaf_;
    uint64_t start_ = 0, end_ = 0;  // the chunk's bytes in the file
    uint64_t consumed_ = 0;         // bytes of the chunk read so far
    int64_t values_seen_ = 0;

    std::vector<uint8_t> raw_, page_;
    std::vector<uint32_t> reps_, defs_, indices_;
    std::vector<std::string_view> values_;
    std::string delta_storage_;
    std::string dict_bytes_;
    std::vector<std::string_view> dict_;
    bool has_dict_ = false;
    std::size_t level_pos_ = 0, value_pos_ = 0;
};

}  // namespace llmt::data::parquet
