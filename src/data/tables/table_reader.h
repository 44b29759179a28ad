// One table file of a Hugging Face dataset (Parquet, or Arrow IPC stream/file), read row by row for
// the few columns a caller selects: string columns (documents, prompts) and `messages` columns
// (list<struct<role: string, content: string>>). Formats and limits: docs/data.md "Hugging Face datasets".
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace llmt::data {

enum class ColumnKind { kString, kMessages };

struct ColumnSpec {
    std::string name;  // a top-level column
    ColumnKind kind = ColumnKind::kString;
};

struct TableMessage {
    std::optional<std::string> role, content;  // nullopt: null in the file
};

// One selected column's value in one row.
struct TableCell {
    bool null = true;
    std::string text;                    // kString
    std::vector<TableMessage> messages;  // kMessages
};

// Reads the selected columns of a table file in row order, one row group (Parquet) or record batch
// (Arrow) at a time, so memory follows the largest page or batch, not the file. Errors are
// FormatError naming the file, the column and a byte offset. Not thread-safe.
class TableReader {
public:
    virtual ~TableReader() = default;

    // Top-level column names, in schema order.
    virtual std::vector<std::string> column_names() const = 0;
    virtual bool has_column(const std::string& name) const = 0;
    // Chooses the columns next_row fills, in this order. Throws FormatError when one is missing or of
    // another type (naming what it is).
    virtual void select(const std::vector<ColumnSpec>& columns) = 0;
    // Fills `row` (one cell per selected column); false after the last row.
    virtual bool next_row(std::vector<TableCell>& row) = 0;
    // File bytes consumed so far (progress).
    virtual uint64_t bytes_read() const = 0;
};

// Opens a Parquet file ("PAR1" at both ends) or an Arrow IPC file ("ARROW1") or stream, by content.
// Throws FormatError when it is neither, IoError when it cannot be read.
std::unique_ptr<TableReader> open_table(const std::filesystem::path& path);

// True when `path`'s name says it is a table file (.parquet, .arrow).
bool is_table_file_name(const std::filesystem::path& path);

}  // namespace llmt::data
