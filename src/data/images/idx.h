// IDX files (the MNIST format: LeCun's "idx1-ubyte"/"idx3-ubyte"), raw or gzip-compressed. A header of
// magic (two zero bytes, the element type 0x08 = unsigned byte, the rank), then `rank` big-endian u32
// dimensions, then the elements. Every field is checked against the file's size; a short or corrupt file
// is a FormatError naming the file and the byte offset (in the decompressed stream for .gz) where it
// went wrong.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace llmt::data {

struct IdxArray {
    std::vector<int64_t> dims;  // dims[0]: items (images or labels)
    std::vector<uint8_t> data;  // row-major, product(dims) bytes
    int64_t items() const { return dims.empty() ? 0 : dims[0]; }
    int64_t item_size() const;  // product(dims[1:])
};

// Reads an IDX file of unsigned bytes with `rank` dimensions (1: labels, 3: images). FormatError for a
// wrong magic, element type or rank, a zero dimension, a file shorter than its header says (naming the
// offset where the data ends and the size it should have) or longer; IoError when it cannot be read.
IdxArray read_idx(const std::filesystem::path& path, int rank);

// The dimensions in the header of an IDX file (raw or .gz) without reading its data, for sizing a run
// before it starts (the server's estimates): FormatError for a short header, a wrong magic or rank or a
// zero dimension; IoError when it cannot be read. read_idx checks the rest when the run reads it.
std::vector<int64_t> read_idx_dims(const std::filesystem::path& path, int rank);

// Decompressed bytes of `path` (gzip when the name ends in .gz): FormatError naming the compressed offset
// for a truncated or corrupt gzip stream. Unbounded: read_idx inflates no more than the header declares.
std::vector<uint8_t> read_maybe_gzip(const std::filesystem::path& path);

}  // namespace llmt::data
