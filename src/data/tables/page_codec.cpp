// decompress_page (page_codec.h): bounded streaming inflate for gzip and zstd; snappy is validated
// and its own length header compared with the declared size before the output is allocated.
#include "data/tables/page_codec.h"

#include <fmt/format.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/error.h"

namespace llmt::data {

namespace {

[[noreturn]] void fail(const PageLocation& at, std::string_view what) {
    throw FormatError(fmt::format("{}: column '{}', page at byte offset {}: {}", at.file, at.column, at.offset, what));
}

// Grows `out` in steps as output arrives, never past `declared` + 1 (one extra byte is what tells an
// over-long stream apart from an exact one).
std::size_t next_capacity(std::size_t have, std::size_t declared) {
    const std::size_t want = std::max<std::size_t>(have * 2, 64 << 10);
    return std::min(want, declared + 1);
}

void inflate_gzip(const uint8_t* src, std::size_t n, std::size_t declared, const PageLocation& at,
                  std::vector<uint8_t>& out) {
    z_stream zs{};
    // 32 + MAX_WBITS: a gzip or a zlib header, detected (zlib manual, inflateInit2).
    if (inflateInit2(&zs, 32 + MAX_WBITS) != Z_OK) throw Error("zlib: inflateInit2 failed");
    std::unique_ptr<z_stream, void (*)(z_stream*)> guard(&zs, [](z_stream* z) { inflateEnd(z); });
    zs.next_in = const_cast<Bytef*>(src);
    zs.avail_in = static_cast<uInt>(n);
    std::size_t produced = 0;
    for (;;) {
        if (produced == out.size()) {
            if (out.size() > declared)
                fail(at, fmt::format("gzip data inflates to more than the declared {} bytes", declared));
            out.resize(next_capacity(out.size(), declared));
        }
        zs.next_out = out.data() + produced;
        zs.avail_out = static_cast<uInt>(out.size() - produced);
        const int rc = inflate(&zs, Z_NO_FLUSH);
        produced = out.size() - zs.avail_out;
        if (produced > declared)
            fail(at, fmt::format("gzip data inflates to more than the declared {} bytes", declared));
        if (rc == Z_STREAM_END) break;
        if (rc == Z_BUF_ERROR && zs.avail_in == 0) fail(at, "truncated gzip data");
        if (rc != Z_OK && rc != Z_BUF_ERROR) fail(at, fmt::format("bad gzip data ({})", zs.msg ? zs.msg : zError(rc)));
    }
    out.resize(produced);
}

void inflate_zstd(const uint8_t* src, std::size_t n, std::size_t declared, const PageLocation& at,
                  std::vector<uint8_t>& out) {
    std::unique_ptr<ZSTD_DCtx, std::size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
    if (!ctx) throw Error("zstd: cannot create a decompression context");
    // A frame may ask for a window of up to 2 GiB; cap it so a hostile header cannot make libzstd
    // allocate that much (pages are at most kMaxPageBytes anyway).
    ZSTD_DCtx_setParameter(ctx.get(), ZSTD_d_windowLogMax, 27);
    ZSTD_inBuffer in{src, n, 0};
    std::size_t produced = 0;
    std::size_t rc = 1;
    while (rc != 0) {
        if (produced == out.size()) {
            if (out.size() > declared)
                fail(at, fmt::format("zstd data decompresses to more than the declared {} bytes", declared));
            out.resize(next_capacity(out.size(), declared));
        }
        ZSTD_outBuffer o{out.data(), out.size(), produced};
        rc = ZSTD_decompressStream(ctx.get(), &o, &in);
        if (ZSTD_isError(rc)) fail(at, fmt::format("bad zstd data ({})", ZSTD_getErrorName(rc)));
        produced = o.pos;
        if (produced > declared)
            fail(at, fmt::format("zstd data decompresses to more than the declared {} bytes", declared));
        if (rc != 0 && in.pos == in.size && o.pos < o.size) fail(at, "truncated zstd data");
        // Concatenated frames: a finished frame with input left starts the next one.
        if (rc == 0 && in.pos < in.size) rc = 1;
    }
    out.resize(produced);
}

void inflate_snappy(const uint8_t* src, std::size_t n, std::size_t declared, const PageLocation& at,
                    std::vector<uint8_t>& out) {
    const char* s = reinterpret_cast<const char*>(src);
    std::size_t len = 0;
    if (!snappy::GetUncompressedLength(s, n, &len)) fail(at, "bad snappy data (no length header)");
    if (len != declared)
        fail(at, fmt::format("snappy data holds {} bytes, the page header declares {}", len, declared));
    if (!snappy::IsValidCompressedBuffer(s, n)) fail(at, "bad snappy data");
    out.resize(len);
    if (!snappy::RawUncompress(s, n, reinterpret_cast<char*>(out.data()))) fail(at, "bad snappy data");
}

}  // namespace

std::string_view codec_name(int32_t codec) {
    switch (codec) {
        case 0: return "uncompressed";
        case 1: return "snappy";
        case 2: return "gzip";
        case 3: return "lzo";
        case 4: return "brotli";
        case 5: return "lz4 (hadoop)";
        case 6: return "zstd";
        case 7: return "lz4_raw";
        default: return "unknown";
    }
}

void decompress_page(int32_t codec, const uint8_t* src, std::size_t src_size, std::size_t declared,
                     const PageLocation& at, std::vector<uint8_t>& out) {
    if (declared > kMaxPageBytes)
        fail(at, fmt::format("declared page size {} exceeds the {} byte limit", declared, kMaxPageBytes));
    out.clear();
    switch (codec) {
        case 0:
            if (src_size != declared)
                fail(at, fmt::format("uncompressed page of {} bytes declares {}", src_size, declared));
            out.assign(src, src + src_size);
            return;
        case 1: inflate_snappy(src, src_size, declared, at, out); break;
        case 2: inflate_gzip(src, src_size, declared, at, out); break;
        case 6: inflate_zstd(src, src_size, declared, at, out); break;
        default:
            fail(at,
                 fmt::format(
                     "compression codec {} ({}) is not supported: expected uncompressed, snappy, gzip or zstd (hint: "
                     "rewrite the file with one of those)",
                     codec, codec_name(codec)));
    }
    if (out.size() != declared)
        fail(at, fmt::format("page decompresses to {} bytes, the header declares {}", out.size(), declared));
}

}  // namespace llmt::data
