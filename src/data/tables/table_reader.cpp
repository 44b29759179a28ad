// open_table (table_reader.h): the format is told by the file's first bytes, not its name.
#include "data/tables/table_reader.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>

#include "core/error.h"
#include "core/regular_file.h"
#include "data/tables/arrow_table.h"
#include "data/tables/parquet_table.h"

namespace llmt::data {

bool is_table_file_name(const std::filesystem::path& path) {
    const std::string ext = path.extension().string();
    return ext == ".parquet" || ext == ".arrow";
}

std::unique_ptr<TableReader> open_table(const std::filesystem::path& path) {
    unsigned char head[8] = {};
    {
        const RegularFile f = open_regular_file(path, "dataset file");
        const ssize_t n = ::pread(f.fd.get(), head, sizeof head, 0);
        if (n < 0) throw IoError(fmt::format("cannot read '{}': {}", path.string(), std::strerror(errno)));
    }
    if (std::memcmp(head, "PAR1", 4) == 0) return open_parquet_table(path);
    static const unsigned char kContinuation[4] = {0xff, 0xff, 0xff, 0xff};
    if (std::memcmp(head, "ARROW1", 6) == 0 || std::memcmp(head, kContinuation, 4) == 0) return open_arrow_table(path);
    throw FormatError(fmt::format(
        "{}: byte offset 0: neither a Parquet file (\"PAR1\") nor an Arrow IPC file or stream (\"ARROW1\" or "
        "0xFFFFFFFF)",
        path.string()));
}

}  // namespace llmt::data
