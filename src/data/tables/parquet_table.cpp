// ParquetTable (parquet_table.h). Levels follow the Dremel encoding as the Parquet format specifies
// it: a leaf's max definition level counts its optional and repeated ancestors, its max repetition
// level its repeated ones; a repetition level of 0 starts a new row.
#include "data/tables/parquet_table.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/regular_file.h"
#include "data/tables/parquet_meta.h"
#include "data/tables/parquet_pages.h"

namespace llmt::data {

namespace {

using namespace parquet;

constexpr uint64_t kMaxFooterBytes = uint64_t{64} << 20;
constexpr int kMaxSchemaDepth = 32;

std::string type_name(int32_t t) {
    static const char* names[] = {"BOOLEAN", "INT32",  "INT64",      "INT96",
                                  "FLOAT",   "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
    if (t >= 0 && t < 8) return names[t];
    return t < 0 ? "a group" : fmt::format("type {}", t);
}

struct TopField {
    std::string name;
    bool group = false;
    std::size_t first_leaf = 0, leaf_count = 0;
};

// A column cursor with one entry of look-ahead (a row ends where the next entry has rep == 0).
struct Cursor {
    std::unique_ptr<ColumnPages> pages;
    LevelEntry entry;
    std::string value;  // the peeked entry's value, copied (the page may change on the next read)
    bool has = false;
    bool ended = false;

    bool peek() {
        if (!has && !ended) {
            has = pages->next(entry);
            ended = !has;
            if (has) value.assign(entry.value.data(), entry.value.size());
        }
        return has;
    }
    void take() { has = false; }
};

class ParquetTable final : public TableReader {
public:
    explicit ParquetTable(const std::filesystem::path& path);

    std::vector<std::string> column_names() const override {
        std::vector<std::string> out;
        for (const auto& f : fields_) out.push_back(f.name);
        return out;
    }
    bool has_column(const std::string& name) const override { return find(name) != nullptr; }
    void select(const std::vector<ColumnSpec>& columns) override;
    bool next_row(std::vector<TableCell>& row) override;
    uint64_t bytes_read() const override {
        if (meta_.row_groups.empty()) return size_;
        return size_ * static_cast<uint64_t>(group_) / meta_.row_groups.size();
    }

private:
    struct Selected {
        ColumnSpec spec;
        std::vector<std::size_t> leaves;  // string: 1; messages: role, content
    };

    const TopField* find(const std::string& name) const {
        for (const auto& f : fields_)
            if (f.name == name) return &f;
        return nullptr;
    }
    [[noreturn]] void schema_fail(const std::string& what) const {
        throw FormatError(fmt::format("{}: byte offset {} (the schema in the footer): {}", file_, footer_at_, what));
    }
    std::size_t walk(std::size_t i, int def, int rep, int repeated_def, const std::string& prefix, int depth);
    bool open_group();

    std::string file_;
    RegularFile fd_;
    uint64_t size_ = 0;
    uint64_t footer_at_ = 0;
    FileMetaData meta_;
    std::vector<Leaf> leaves_;
    std::vector<TopField> fields_;
    std::vector<Selected> selected_;
    std::size_t group_ = 0;  // next row group to open
    std::vector<std::vector<Cursor>> cursors_;
    int64_t rows_left_ = 0;
};

ParquetTable::ParquetTable(const std::filesystem::path& path)
    : file_(path.string()), fd_(open_regular_file(path, "Parquet file")) {
    size_ = fd_.size;
    auto read = [&](uint64_t off, std::size_t n) {
        std::vector<uint8_t> b(n);
        std::size_t got = 0;
        while (got < n) {
            const ssize_t r = ::pread(fd_.fd.get(), b.data() + got, n - got, static_cast<off_t>(off + got));
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) throw IoError(fmt::format("cannot read '{}': {}", file_, std::strerror(errno)));
            if (r == 0) throw FormatError(fmt::format("{}: byte offset {}: the file ends early", file_, off + got));
            got += static_cast<std::size_t>(r);
        }
        return b;
    };
    if (size_ < 12)
        throw FormatError(fmt::format("{}: byte offset 0: {} bytes is too short for a Parquet file", file_, size_));
    const auto head = read(0, 4);
    if (std::memcmp(head.data(), "PAR1", 4) != 0)
        throw FormatError(fmt::format("{}: byte offset 0: no Parquet magic \"PAR1\"", file_));
    const auto tail = read(size_ - 8, 8);
    if (std::memcmp(tail.data() + 4, "PAR1", 4) != 0) {
        throw FormatError(fmt::format("{}: byte offset {}: no Parquet magic \"PAR1\" at the end (truncated file?)",
                                      file_, size_ - 4));
    }
    uint32_t footer_len;
    std::memcpy(&footer_len, tail.data(), 4);
    if (footer_len > size_ - 12 || footer_len > kMaxFooterBytes) {
        throw FormatError(
            fmt::format("{}: byte offset {}: footer length {} does not fit in the {} byte file (limit {})", file_,
                        size_ - 8, footer_len, size_, kMaxFooterBytes));
    }
    footer_at_ = size_ - 8 - footer_len;
    const auto footer = read(footer_at_, footer_len);
    meta_ = decode_file_metadata(footer.data(), footer.size(), footer_at_, file_);

    const std::size_t end = walk(0, 0, 0, 0, "", 0);
    if (end != meta_.schema.size())
        schema_fail(fmt::format("{} schema elements, the root's children cover {}", meta_.schema.size(), end));
    for (std::size_t g = 0; g < meta_.row_groups.size(); ++g) {
        const auto& cols = meta_.row_groups[g].columns;
        if (cols.size() != leaves_.size()) {
            schema_fail(fmt::format("row group {} has {} column chunks, the schema {} leaf columns", g, cols.size(),
                                    leaves_.size()));
        }
        if (meta_.row_groups[g].num_rows < 0)
            schema_fail(fmt::format("row group {} has {} rows", g, meta_.row_groups[g].num_rows));
    }
}

// Depth-first over the flattened schema; returns the index after element i's subtree.
std::size_t ParquetTable::walk(std::size_t i, int def, int rep, int repeated_def, const std::string& prefix,
                               int depth) {
    if (depth > kMaxSchemaDepth) schema_fail(fmt::format("schema nested deeper than {}", kMaxSchemaDepth));
    if (i >= meta_.schema.size()) schema_fail("a group's children run past the end of the schema");
    const SchemaElement& e = meta_.schema[i];
    if (depth > 0) {
        if (e.repetition == kOptional) ++def;
        if (e.repetition == kRepeated) {
            ++def;
            ++rep;
            if (rep == 1) repeated_def = def;
        }
    }
    const std::string path = depth == 0 ? "" : (prefix.empty() ? e.name : prefix + "." + e.name);
    if (depth == 1) fields_.push_back({e.name, e.num_children > 0 || e.type < 0, leaves_.size(), 0});
    std::size_t next = i + 1;
    if (e.num_children > 0 || depth == 0) {
        if (e.num_children < 0 || static_cast<std::size_t>(e.num_children) > meta_.schema.size()) {
            schema_fail(fmt::format("element '{}' declares {} children", e.name, e.num_children));
        }
        for (int32_t c = 0; c < e.num_children; ++c) next = walk(next, def, rep, repeated_def, path, depth + 1);
    } else {
        leaves_.push_back({path, e.type, def, rep, repeated_def});
    }
    if (depth == 1) fields_.back().leaf_count = leaves_.size() - fields_.back().first_leaf;
    return next;
}

void ParquetTable::select(const std::vector<ColumnSpec>& columns) {
    selected_.clear();
    for (const auto& spec : columns) {
        const TopField* f = find(spec.name);
        if (!f) {
            std::string names;
            for (const auto& x : fields_) names += (names.empty() ? "" : ", ") + x.name;
            schema_fail(fmt::format("no column '{}' (columns: {})", spec.name, names));
        }
        Selected s{spec, {}};
        if (spec.kind == ColumnKind::kString) {
            const Leaf& l = leaves_[f->first_leaf];
            if (f->group || l.type != kByteArray || l.max_rep != 0) {
                schema_fail(fmt::format("column '{}' is {}, expected a string column (BYTE_ARRAY)", spec.name,
                                        f->group ? "a nested group" : type_name(l.type)));
            }
            s.leaves.push_back(f->first_leaf);
        } else {
            std::optional<std::size_t> role, content;
            for (std::size_t k = f->first_leaf; k < f->first_leaf + f->leaf_count; ++k) {
                const std::string& p = leaves_[k].path;
                auto ends = [&](std::string_view suffix) {
                    return p.size() > suffix.size() && p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0;
                };
                if (ends(".role")) role = k;
                if (ends(".content")) content = k;
            }
            if (!role || !content) {
                schema_fail(fmt::format("column '{}' is not a list of {{role, content}} structs", spec.name));
            }
            for (std::size_t k : {*role, *content}) {
                const Leaf& l = leaves_[k];
                if (l.type != kByteArray || l.max_rep != 1) {
                    schema_fail(fmt::format("column '{}' is {} with repetition level {}, expected a string in a list",
                                            l.path, type_name(l.type), l.max_rep));
                }
            }
            if (leaves_[*role].repeated_def != leaves_[*content].repeated_def)
                schema_fail(fmt::format("column '{}': role and content are in different lists", spec.name));
            s.leaves = {*role, *content};
        }
        selected_.push_back(std::move(s));
    }
}

bool ParquetTable::open_group() {
    cursors_.clear();
    while (group_ < meta_.row_groups.size()) {
        const RowGroup& g = meta_.row_groups[group_++];
        if (g.num_rows == 0) continue;
        for (const auto& s : selected_) {
            std::vector<Cursor> cs;
            for (std::size_t leaf : s.leaves) {
                Cursor c;
                c.pages = std::make_unique<ColumnPages>(fd_.fd.get(), file_, size_, g.columns[leaf], leaves_[leaf]);
                cs.push_back(std::move(c));
            }
            cursors_.push_back(std::move(cs));
        }
        rows_left_ = g.num_rows;
        return true;
    }
    return false;
}

bool ParquetTable::next_row(std::vector<TableCell>& row) {
    while (rows_left_ == 0) {
        if (!open_group()) return false;
    }
    row.resize(selected_.size());
    for (std::size_t s = 0; s < selected_.size(); ++s) {
        TableCell& cell = row[s];
        cell.text.clear();
        cell.messages.clear();
        cell.null = true;
        auto& cs = cursors_[s];
        const Leaf& first = leaves_[selected_[s].leaves[0]];
        auto short_column = [&](const Leaf& l) {
            return FormatError(fmt::format("{}: column '{}': row group {} has fewer values than its {} rows", file_,
                                           l.path, group_ - 1, meta_.row_groups[group_ - 1].num_rows));
        };
        if (selected_[s].spec.kind == ColumnKind::kString) {
            if (!cs[0].peek()) throw short_column(first);
            cell.null = static_cast<int>(cs[0].entry.def) != first.max_def;
            if (!cell.null) cell.text.swap(cs[0].value);
            cs[0].take();
            continue;
        }
        // messages: one entry per list element (or one for a null/empty list); rep 0 starts the row.
        const Leaf& content_leaf = leaves_[selected_[s].leaves[1]];
        bool first_entry = true;
        for (;;) {
            const bool a = cs[0].peek(), b = cs[1].peek();
            if (first_entry && (!a || !b)) throw short_column(a ? content_leaf : first);
            if (!a || !b || (!first_entry && (cs[0].entry.rep == 0 || cs[1].entry.rep == 0))) break;
            if (cs[0].entry.rep != cs[1].entry.rep) {
                throw FormatError(fmt::format("{}: column '{}': role and content lists do not line up in row group {}",
                                              file_, selected_[s].spec.name, group_ - 1));
            }
            const uint32_t d = cs[0].entry.def;
            if (first_entry) cell.null = static_cast<int>(d) + 1 < first.repeated_def;
            if (static_cast<int>(d) >= first.repeated_def) {
                TableMessage m;
                if (static_cast<int>(d) == first.max_def) m.role = std::move(cs[0].value);
                if (static_cast<int>(cs[1].entry.def) == content_leaf.max_def) m.content = std::move(cs[1].value);
                cell.messages.push_back(std::move(m));
            }
            cs[0].take();
            cs[1].take();
            first_entry = false;
        }
    }
    if (--rows_left_ == 0) {
        for (auto& cs : cursors_) {
            for (auto& c : cs) {
                if (c.peek())
                    throw FormatError(
                        fmt::format("{}: row group {}: a column has more values than the row group's {} rows", file_,
                                    group_ - 1, meta_.row_groups[group_ - 1].num_rows));
            }
        }
    }
    return true;
}

}  // namespace

std::unique_ptr<TableReader> open_parquet_table(const std::filesystem::path& path) {
    return std::make_unique<ParquetTable>(path);
}

}  // namespace llmt::data
