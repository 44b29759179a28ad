// ArrowTable (arrow_table.h), following the Arrow columnar format's IPC specification: each message is
// <0xFFFFFFFF><int32 metadata length><Message flatbuffer><body>; a Schema message, then record
// batches whose FieldNodes and Buffers list the schema's fields depth-first.
#include "data/tables/arrow_table.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/regular_file.h"
#include "data/tables/flatbuffer_view.h"

namespace llmt::data {

namespace {

// Type ids of the Arrow schema's Type union.
enum ArrowType : uint8_t {
    kNull = 1,
    kInt = 2,
    kFloatingPoint = 3,
    kBinary = 4,
    kUtf8 = 5,
    kBool = 6,
    kDecimal = 7,
    kDate = 8,
    kTime = 9,
    kTimestamp = 10,
    kInterval = 11,
    kList = 12,
    kStruct = 13,
    kUnion = 14,
    kFixedSizeBinary = 15,
    kFixedSizeList = 16,
    kMap = 17,
    kDuration = 18,
    kLargeBinary = 19,
    kLargeUtf8 = 20,
    kLargeList = 21,
};
enum MessageType : uint8_t { kSchemaMessage = 1, kDictionaryBatch = 2, kRecordBatch = 3 };

constexpr uint64_t kMaxMetadataBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxBufferBytes = uint64_t{512} << 20;

struct Field {
    std::string name;
    uint8_t type = 0;
    bool dictionary = false;
    std::vector<std::size_t> children;  // indices into fields_
    std::size_t node = 0;               // its FieldNode index
    std::size_t buffer = 0;             // its first buffer index
    int buffers = 0;
};

const char* type_name(uint8_t t) {
    switch (t) {
        case kNull: return "null";
        case kInt: return "int";
        case kFloatingPoint: return "float";
        case kBinary: return "binary";
        case kUtf8: return "string";
        case kBool: return "bool";
        case kList: return "list";
        case kStruct: return "struct";
        case kLargeBinary: return "large_binary";
        case kLargeUtf8: return "large_string";
        case kLargeList: return "large_list";
        case kMap: return "map";
        default: return "another type";
    }
}

// Buffers per field in a record batch (the format's "Buffer Layout" table), -1: not readable here.
int buffer_count(uint8_t t) {
    switch (t) {
        case kNull: return 0;
        case kStruct: case kFixedSizeList: return 1;
        case kInt:
        case kFloatingPoint:
        case kBool:
        case kDecimal:
        case kDate:
        case kTime:
        case kTimestamp:
        case kInterval:
        case kFixedSizeBinary: case kDuration: case kList: case kLargeList: case kMap: return 2;
        case kBinary: case kUtf8: case kLargeBinary: case kLargeUtf8: return 3;
        default: return -1;
    }
}

bool is_string(uint8_t t) { return t == kUtf8 || t == kLargeUtf8; }

// One string array of a record batch: validity bitmap, offsets and data, read from the file.
struct StringArray {
    int64_t length = 0;
    std::vector<uint8_t> validity, offsets, data;
    bool large = false;

    bool valid(int64_t i) const {
        return validity.empty() || ((validity[static_cast<std::size_t>(i >> 3)] >> (i & 7)) & 1);
    }
    uint64_t offset(int64_t i) const {
        if (large) {
            int64_t v;
            std::memcpy(&v, offsets.data() + 8 * i, 8);
            return static_cast<uint64_t>(v);
        }
        int32_t v;
        std::memcpy(&v, offsets.data() + 4 * i, 4);
        return static_cast<uint64_t>(static_cast<uint32_t>(v));
    }
    std::string_view at(int64_t i) const {
        const uint64_t a = offset(i), b = offset(i + 1);
        return {reinterpret_cast<const char*>(data.data() + a), static_cast<std::size_t>(b - a)};
    }
};

class ArrowTable final : public TableReader {
public:
    explicit ArrowTable(const std::filesystem::path& path);

    std::vector<std::string> column_names() const override {
        std::vector<std::string> out;
        for (std::size_t i : top_) out.push_back(fields_[i].name);
        return out;
    }
    bool has_column(const std::string& name) const override { return find(name).has_value(); }
    void select(const std::vector<ColumnSpec>& columns) override;
    bool next_row(std::vector<TableCell>& row) override;
    uint64_t bytes_read() const override { return pos_; }

private:
    struct Message {
        uint8_t type = 0;
        std::vector<uint8_t> meta;
        uint64_t meta_at = 0;  // file offset of the flatbuffer
        uint64_t body_at = 0;
        uint64_t body_len = 0;
    };
    struct Selected {
        ColumnSpec spec;
        std::size_t field = 0;
        // string: the array; messages: list offsets + struct validity + role + content
        StringArray str;
        std::vector<uint8_t> list_validity, list_offsets, struct_validity;
        bool large_list = false;
        StringArray role, content;
    };

    std::optional<std::size_t> find(const std::string& name) const {
        for (std::size_t i : top_)
            if (fields_[i].name == name) return i;
        return std::nullopt;
    }
    [[noreturn]] void fail(uint64_t at, const std::string& what) const {
        throw FormatError(fmt::format("{}: byte offset {}: {}", file_, at, what));
    }
    std::vector<uint8_t> read_at(uint64_t off, uint64_t n) const;
    void read_file_footer();
    void read_schema(const FlatTable& schema, uint64_t at);
    bool read_message(Message& m);
    std::size_t add_field(const FlatTable& f, std::size_t& node, std::size_t& buffer, uint64_t at, int depth);
    bool load_batch();
    std::vector<uint8_t> buffer(const Message& m, const FlatTable& rb, std::size_t index, uint64_t min_len,
                                const std::string& column) const;
    void load_string(const Message& m, const FlatTable& rb, const Field& f, int64_t length, StringArray& out) const;

    std::string file_;
    RegularFile fd_;
    uint64_t size_ = 0;
    uint64_t pos_ = 0;
    uint64_t end_ = 0;  // where messages stop (the file format's footer)
    std::vector<Field> fields_;
    std::vector<std::size_t> top_;
    std::size_t node_count_ = 0, buffer_count_ = 0;
    std::vector<Selected> selected_;
    int64_t batch_rows_ = 0, row_ = 0;
    bool done_ = false;
    bool file_format_ = false;
    uint64_t schema_at_ = 0;  // where the schema's metadata starts, for column errors
    std::vector<uint8_t> footer_;
    std::vector<uint64_t> blocks_;  // file format: record batch message offsets
    std::size_t next_block_ = 0;
};

std::vector<uint8_t> ArrowTable::read_at(uint64_t off, uint64_t n) const {
    if (off > size_ || n > size_ - off)
        fail(off, fmt::format("{} bytes needed here, but the file ends at {} (truncated?)", n, size_));
    std::vector<uint8_t> b(static_cast<std::size_t>(n));
    std::size_t got = 0;
    while (got < n) {
        const ssize_t r =
            ::pread(fd_.fd.get(), b.data() + got, static_cast<std::size_t>(n) - got, static_cast<off_t>(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) throw IoError(fmt::format("cannot read '{}': {}", file_, std::strerror(errno)));
        if (r == 0) fail(off + got, "the file ends early");
        got += static_cast<std::size_t>(r);
    }
    return b;
}

ArrowTable::ArrowTable(const std::filesystem::path& path)
    : file_(path.string()), fd_(open_regular_file(path, "Arrow IPC file")) {
    size_ = end_ = fd_.size;
    if (size_ >= 8 && std::memcmp(read_at(0, 8).data(), "ARROW1", 6) == 0) {
        read_file_footer();
        return;
    }
    Message m;
    if (!read_message(m)) fail(pos_, "no schema message (empty stream)");
    if (m.type != kSchemaMessage)
        fail(m.meta_at, fmt::format("the first message has type {}, expected a schema", m.type));
    const std::string where = fmt::format("{}: schema message at byte offset {}", file_, m.meta_at);
    const FlatTable msg = FlatTable::root(m.meta.data(), m.meta.size(), where);
    read_schema(msg.table(2), m.meta_at);
}

// File format: magic (padded to 8), the stream, the footer (schema + record batch blocks), its int32
// length, magic. The footer's schema is authoritative (some writers put no schema message first).
void ArrowTable::read_file_footer() {
    if (size_ < 18) fail(0, "too short for an Arrow IPC file");
    const auto tail = read_at(size_ - 10, 10);
    if (std::memcmp(tail.data() + 4, "ARROW1", 6) != 0)
        fail(size_ - 6, "no closing \"ARROW1\" magic (truncated file?)");
    int32_t len;
    std::memcpy(&len, tail.data(), 4);
    if (len <= 0 || static_cast<uint64_t>(len) > size_ - 18 || static_cast<uint64_t>(len) > kMaxMetadataBytes) {
        fail(size_ - 10, fmt::format("footer length {} does not fit in the file", len));
    }
    const uint64_t at = size_ - 10 - static_cast<uint64_t>(len);
    footer_ = read_at(at, static_cast<uint64_t>(len));
    const std::string where = fmt::format("{}: footer at byte offset {}", file_, at);
    const FlatTable footer = FlatTable::root(footer_.data(), footer_.size(), where);
    read_schema(footer.table(1), at);
    // Block: offset (int64), metadata length (int32 + 4 bytes padding), body length (int64).
    const auto blocks = footer.vector(3, 24);
    for (std::size_t i = 0; i < blocks.size; ++i) {
        const int64_t off = footer.i64_at(blocks.pos + 24 * i);
        if (off < 8 || static_cast<uint64_t>(off) >= at)
            fail(at, fmt::format("record batch block {} at byte offset {} lies outside the file", i, off));
        blocks_.push_back(static_cast<uint64_t>(off));
    }
    end_ = at;
    file_format_ = true;
}

void ArrowTable::read_schema(const FlatTable& schema, uint64_t at) {
    schema_at_ = at;
    if (schema.i16(0) != 0) fail(at, "big-endian Arrow data is not supported");
    const auto fv = schema.vector(1, 4);
    std::size_t node = 0, buf = 0;
    for (std::size_t i = 0; i < fv.size; ++i) top_.push_back(add_field(schema.table_at(fv, i), node, buf, at, 0));
    node_count_ = node;
    buffer_count_ = buf;
}

std::size_t ArrowTable::add_field(const FlatTable& f, std::size_t& node, std::size_t& buffer, uint64_t at, int depth) {
    if (depth > 32) fail(at, "schema nested deeper than 32");
    Field x;
    x.name = f.str(0);
    x.type = f.u8(2);
    x.dictionary = f.has(4);
    x.node = node++;
    x.buffer = buffer;
    x.buffers = buffer_count(x.type);
    // Fields of types whose layout is not known here cannot be skipped over; refuse them by name.
    if (x.buffers < 0)
        fail(at, fmt::format("column '{}' has Arrow type id {}, which this reader cannot lay out", x.name, x.type));
    buffer += static_cast<std::size_t>(x.buffers);
    const std::size_t self = fields_.size();
    fields_.push_back(x);
    const auto cv = f.vector(5, 4);
    std::vector<std::size_t> kids;
    for (std::size_t i = 0; i < cv.size; ++i)
        kids.push_back(add_field(f.table_at(cv, i), node, buffer, at, depth + 1));
    fields_[self].children = std::move(kids);
    return self;
}

bool ArrowTable::read_message(Message& m) {
    if (pos_ + 4 > end_) {
        if (pos_ == end_) return false;  // a stream may end without an end-of-stream marker
        fail(pos_, "a message header is cut short (truncated file?)");
    }
    auto word = read_at(pos_, 4);
    uint32_t len;
    std::memcpy(&len, word.data(), 4);
    uint64_t at = pos_ + 4;
    if (len == 0xFFFFFFFFu) {  // continuation marker, then the length
        if (at + 4 > end_) fail(at, "a message length is cut short (truncated file?)");
        word = read_at(at, 4);
        std::memcpy(&len, word.data(), 4);
        at += 4;
    }
    if (len == 0) {
        pos_ = at;
        return false;  // end of stream
    }
    if (len > kMaxMetadataBytes || len > end_ - at)
        fail(pos_, fmt::format("message metadata of {} bytes does not fit in the file", len));
    m.meta = read_at(at, len);
    m.meta_at = at;
    const std::string where = fmt::format("{}: message at byte offset {}", file_, at);
    const FlatTable msg = FlatTable::root(m.meta.data(), m.meta.size(), where);
    m.type = msg.u8(1);
    const int64_t body = msg.i64(3);
    m.body_at = at + len;
    if (body < 0 || static_cast<uint64_t>(body) > end_ - m.body_at) {
        fail(at, fmt::format("message body of {} bytes runs past the end of the file ({} bytes left; truncated?)",
                             body, end_ - m.body_at));
    }
    m.body_len = static_cast<uint64_t>(body);
    pos_ = m.body_at + m.body_len;
    return true;
}

void ArrowTable::select(const std::vector<ColumnSpec>& columns) {
    selected_.clear();
    auto names = [&] {
        std::string s;
        for (std::size_t i : top_) s += (s.empty() ? "" : ", ") + fields_[i].name;
        return s;
    };
    for (const auto& spec : columns) {
        const auto idx = find(spec.name);
        if (!idx) fail(schema_at_, fmt::format("no column '{}' (columns: {})", spec.name, names()));
        const Field& f = fields_[*idx];
        if (f.dictionary)
            fail(schema_at_, fmt::format("column '{}' is dictionary-encoded, which is not supported", spec.name));
        Selected s;
        s.spec = spec;
        s.field = *idx;
        if (spec.kind == ColumnKind::kString) {
            if (!is_string(f.type))
                fail(schema_at_,
                     fmt::format("column '{}' is {}, expected a string column", spec.name, type_name(f.type)));
        } else {
            bool ok = (f.type == kList || f.type == kLargeList) && f.children.size() == 1 &&
                      fields_[f.children[0]].type == kStruct;
            int found = 0;
            if (ok) {
                for (std::size_t k : fields_[f.children[0]].children) {
                    const Field& c = fields_[k];
                    if ((c.name == "role" || c.name == "content") && !c.dictionary) {
                        if (!is_string(c.type))
                            fail(schema_at_, fmt::format("column '{}.{}' is {}, expected a string", spec.name, c.name,
                                                         type_name(c.type)));
                        ++found;
                    }
                }
            }
            if (!ok || found != 2)
                fail(schema_at_, fmt::format("column '{}' is {}, expected a list of {{role, content}} structs",
                                             spec.name, type_name(f.type)));
        }
        selected_.push_back(std::move(s));
    }
}

std::vector<uint8_t> ArrowTable::buffer(const Message& m, const FlatTable& rb, std::size_t index, uint64_t min_len,
                                        const std::string& column) const {
    const auto bv = rb.vector(2, 16);
    if (index >= bv.size) fail(m.meta_at, fmt::format("record batch has {} buffers, the schema needs more", bv.size));
    const int64_t off = rb.i64_at(bv.pos + 16 * index), len = rb.i64_at(bv.pos + 16 * index + 8);
    if (off < 0 || len < 0 || static_cast<uint64_t>(off) > m.body_len ||
        static_cast<uint64_t>(len) > m.body_len - static_cast<uint64_t>(off)) {
        fail(m.meta_at, fmt::format("column '{}': buffer {} (offset {}, {} bytes) lies outside the {} byte body",
                                    column, index, off, len, m.body_len));
    }
    if (static_cast<uint64_t>(len) > kMaxBufferBytes)
        fail(m.body_at + static_cast<uint64_t>(off),
             fmt::format("column '{}': buffer of {} bytes exceeds the {} byte limit", column, len, kMaxBufferBytes));
    if (static_cast<uint64_t>(len) < min_len) {
        fail(m.body_at + static_cast<uint64_t>(off),
             fmt::format("column '{}': buffer of {} bytes, at least {} expected", column, len, min_len));
    }
    return read_at(m.body_at + static_cast<uint64_t>(off), static_cast<uint64_t>(len));
}

void ArrowTable::load_string(const Message& m, const FlatTable& rb, const Field& f, int64_t length,
                             StringArray& out) const {
    const auto nv = rb.vector(1, 16);
    const int64_t node_len = rb.i64_at(nv.pos + 16 * f.node), nulls = rb.i64_at(nv.pos + 16 * f.node + 8);
    if (node_len != length)
        fail(m.meta_at, fmt::format("column '{}' has {} values, {} expected", f.name, node_len, length));
    out.length = length;
    out.large = f.type == kLargeUtf8;
    const uint64_t w = out.large ? 8 : 4;
    out.validity = buffer(m, rb, f.buffer, nulls > 0 ? static_cast<uint64_t>((length + 7) / 8) : 0, f.name);
    if (nulls == 0) out.validity.clear();
    out.offsets = buffer(m, rb, f.buffer + 1, length > 0 ? static_cast<uint64_t>(length + 1) * w : 0, f.name);
    out.data = buffer(m, rb, f.buffer + 2, 0, f.name);
    uint64_t prev = 0;
    for (int64_t i = 0; i <= length && length > 0; ++i) {
        const uint64_t o = out.offset(i);
        if ((i > 0 && o < prev) || o > out.data.size()) {
            fail(m.body_at,
                 fmt::format("column '{}': string offset {} of row {} is out of order or past the {} data bytes",
                             f.name, o, i, out.data.size()));
        }
        prev = o;
    }
}

bool ArrowTable::load_batch() {
    Message m;
    for (;;) {
        if (file_format_) {
            if (next_block_ >= blocks_.size()) return false;
            pos_ = blocks_[next_block_++];
        }
        if (!read_message(m)) return false;
        if (m.type == kRecordBatch) break;
        if (m.type == kDictionaryBatch) continue;  // only used by dictionary-encoded columns, refused in select()
        fail(m.meta_at, fmt::format("unexpected message type {} after the schema", m.type));
    }
    const std::string where = fmt::format("{}: record batch at byte offset {}", file_, m.meta_at);
    const FlatTable msg = FlatTable::root(m.meta.data(), m.meta.size(), where);
    const FlatTable rb = msg.table(2);
    if (rb.has(3)) fail(m.meta_at, "compressed record batches (LZ4/ZSTD body compression) are not supported");
    const int64_t length = rb.i64(0);
    if (length < 0) fail(m.meta_at, fmt::format("record batch of {} rows", length));
    const auto nv = rb.vector(1, 16);
    if (nv.size != node_count_)
        fail(m.meta_at, fmt::format("record batch has {} field nodes, the schema {}", nv.size, node_count_));
    for (auto& s : selected_) {
        const Field& f = fields_[s.field];
        if (s.spec.kind == ColumnKind::kString) {
            load_string(m, rb, f, length, s.str);
            continue;
        }
        const int64_t list_len = rb.i64_at(nv.pos + 16 * f.node), list_nulls = rb.i64_at(nv.pos + 16 * f.node + 8);
        if (list_len != length)
            fail(m.meta_at, fmt::format("column '{}' has {} values, {} expected", f.name, list_len, length));
        s.large_list = f.type == kLargeList;
        const uint64_t w = s.large_list ? 8 : 4;
        s.list_validity =
            buffer(m, rb, f.buffer, list_nulls > 0 ? static_cast<uint64_t>((length + 7) / 8) : 0, f.name);
        if (list_nulls == 0) s.list_validity.clear();
        s.list_offsets = buffer(m, rb, f.buffer + 1, length > 0 ? static_cast<uint64_t>(length + 1) * w : 0, f.name);
        const Field& st = fields_[f.children[0]];
        const int64_t st_len = rb.i64_at(nv.pos + 16 * st.node), st_nulls = rb.i64_at(nv.pos + 16 * st.node + 8);
        if (st_len < 0) fail(m.meta_at, fmt::format("column '{}': {} struct values", f.name, st_len));
        s.struct_validity =
            buffer(m, rb, st.buffer, st_nulls > 0 ? static_cast<uint64_t>((st_len + 7) / 8) : 0, f.name);
        if (st_nulls == 0) s.struct_validity.clear();
        for (std::size_t k : st.children) {
            const Field& c = fields_[k];
            if (c.name == "role") load_string(m, rb, c, st_len, s.role);
            if (c.name == "content") load_string(m, rb, c, st_len, s.content);
        }
        auto off = [&](int64_t i) -> uint64_t {
            if (s.large_list) {
                int64_t v;
                std::memcpy(&v, s.list_offsets.data() + 8 * i, 8);
                return static_cast<uint64_t>(v);
            }
            int32_t v;
            std::memcpy(&v, s.list_offsets.data() + 4 * i, 4);
            return static_cast<uint64_t>(static_cast<uint32_t>(v));
        };
        for (int64_t i = 0; i <= length && length > 0; ++i) {
            if ((i > 0 && off(i) < off(i - 1)) || off(i) > static_cast<uint64_t>(st_len)) {
                fail(m.body_at,
                     fmt::format("column '{}': list offset of row {} is out of order or past its {} elements", f.name,
                                 i, st_len));
            }
        }
    }
    batch_rows_ = length;
    row_ = 0;
    return true;
}

bool ArrowTable::next_row(std::vector<TableCell>& row) {
    while (row_ >= batch_rows_) {
        if (done_ || !load_batch()) {
            done_ = true;
            return false;
        }
    }
    const int64_t i = row_++;
    row.resize(selected_.size());
    for (std::size_t k = 0; k < selected_.size(); ++k) {
        const Selected& s = selected_[k];
        TableCell& cell = row[k];
        cell.messages.clear();
        cell.text.clear();
        if (s.spec.kind == ColumnKind::kString) {
            cell.null = !s.str.valid(i);
            if (!cell.null) cell.text.assign(s.str.at(i));
            continue;
        }
        cell.null = !s.list_validity.empty() && !((s.list_validity[static_cast<std::size_t>(i >> 3)] >> (i & 7)) & 1);
        if (cell.null) continue;
        auto off = [&](int64_t r) -> int64_t {
            if (s.large_list) {
                int64_t v;
                std::memcpy(&v, s.list_offsets.data() + 8 * r, 8);
                return v;
            }
            int32_t v;
            std::memcpy(&v, s.list_offsets.data() + 4 * r, 4);
            return v;
        };
        for (int64_t j = off(i); j < off(i + 1); ++j) {
            TableMessage msg;
            const bool st_valid =
                s.struct_validity.empty() || ((s.struct_validity[static_cast<std::size_t>(j >> 3)] >> (j & 7)) & 1);
            if (st_valid && s.role.valid(j)) msg.role = std::string(s.role.at(j));
            if (st_valid && s.content.valid(j)) msg.content = std::string(s.content.at(j));
            cell.messages.push_back(std::move(msg));
        }
    }
    return true;
}

}  // namespace

std::unique_ptr<TableReader> open_arrow_table(const std::filesystem::path& path) {
    return std::make_unique<ArrowTable>(path);
}

}  // namespace llmt::data
