// Decompression of one Parquet page with a size limit: snappy, gzip and zstd through their libraries
// (libsnappy, zlib, libzstd). The output may never exceed the size the page header declares, so a
// page that inflates to more (a "zip bomb") is refused after at most that many bytes are written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace llmt::data {

// Where a page sits, for messages: "<file>: column '<column>', page at byte offset N: ...".
struct PageLocation {
    std::string_view file;
    std::string_view column;
    uint64_t offset = 0;
};

// Largest page (compressed or not) a reader accepts: far above what writers produce (1 MiB pages by
// default), and a hard bound on what one page may allocate.
inline constexpr std::size_t kMaxPageBytes = std::size_t{512} << 20;

// Decompresses `src` (Parquet codec number: 0 none, 1 snappy, 2 gzip, 6 zstd) into `out`, which ends
// up exactly `declared` bytes long. Output memory grows only as bytes really come out, so a huge
// declared size with a small payload allocates little. Throws FormatError naming `at` when the codec
// is not supported, the data is corrupt, or it decodes to a different size than declared.
void decompress_page(int32_t codec, const uint8_t* src, std::size_t src_size, std::size_t declared,
                     const PageLocation& at, std::vector<uint8_t>& out);

// "snappy", "gzip", ... for messages.
std::string_view codec_name(int32_t codec);

}  // namespace llmt::data
