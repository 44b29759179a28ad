// The Parquet implementation of TableReader (table_reader.h): footer checks, the schema's levels,
// and rows assembled from the selected columns' pages, one row group at a time.
#pragma once

#include <filesystem>
#include <memory>

#include "data/tables/table_reader.h"

namespace llmt::data {

// Reads the footer of the Parquet file at `path` and checks it (magic at both ends, footer length,
// column chunks inside the file). Throws FormatError naming the file and byte offset.
std::unique_ptr<TableReader> open_parquet_table(const std::filesystem::path& path);

}  // namespace llmt::data
