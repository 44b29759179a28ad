// The Arrow IPC implementation of TableReader (table_reader.h): the streaming format (what
// `datasets`' save_to_disk writes, data-0000k-of-0000n.arrow) and the file format ("ARROW1" at both
// ends), read message by message; only the selected columns' buffers of a record batch are read.
#pragma once

#include <filesystem>
#include <memory>

#include "data/tables/table_reader.h"

namespace llmt::data {

// Reads the schema message of the Arrow IPC stream or file at `path`. Throws FormatError naming the
// file and byte offset.
std::unique_ptr<TableReader> open_arrow_table(const std::filesystem::path& path);

}  // namespace llmt::data
