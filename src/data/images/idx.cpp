#include "data/images/idx.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include <algorithm>

#include "core/error.h"
#include "core/fs.h"

namespace llmt::data {

namespace {

bool is_gzip_name(const std::filesystem::path& p) { return p.extension() == ".gz"; }

// Inflates `packed`, stopping once more than `limit` bytes came out (then `cut` is set and the result
// holds limit + 1 bytes): a small .gz can inflate to gigabytes, so no more is made than the caller needs.
std::vector<uint8_t> inflate_gzip(const std::string& packed, const std::filesystem::path& path, size_t limit,
                                  bool* cut) {
    std::vector<uint8_t> out;
    *cut = false;
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 32) != Z_OK) throw IoError(fmt::format("'{}': cannot start zlib", path.string()));
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
    zs.avail_in = static_cast<uInt>(packed.size());
    uint8_t buf[1 << 16];
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        zs.next_out = buf;
        zs.avail_out = sizeof(buf);
        rc = inflate(&zs, Z_NO_FLUSH);
        out.insert(out.end(), buf, buf + (sizeof(buf) - zs.avail_out));
        if (out.size() > limit) {
            out.resize(limit + 1);
            *cut = true;
            break;
        }
        if (rc == Z_STREAM_END) break;
        if (rc == Z_BUF_ERROR && zs.avail_in == 0) {
            const uLong at = zs.total_in;
            inflateEnd(&zs);
            throw FormatError(
                fmt::format("'{}': truncated gzip stream at compressed offset {} ({} bytes decompressed)",
                            path.string(), at, out.size()));
        }
        if (rc != Z_OK) {
            const std::string msg = zs.msg ? zs.msg : zError(rc);
            const uLong at = zs.total_in;
            inflateEnd(&zs);
            throw FormatError(fmt::format("'{}': bad gzip data at compressed offset {}: {}", path.string(), at, msg));
        }
    }
    inflateEnd(&zs);
    return out;
}

uint32_t be32(const uint8_t* p) {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

int64_t IdxArray::item_size() const {
    int64_t n = 1;
    for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
    return n;
}

namespace {

// The most bytes a .gz IDX file may inflate to: its header and the data its dimensions declare (read
// from the first inflated bytes), or only a header's size when that header cannot be read (the checks
// after inflating then name what is wrong with it).
size_t declared_idx_bytes(const std::filesystem::path& path, int rank) {
    const size_t header = 4 + 4 * static_cast<size_t>(std::clamp(rank, 1, 4));
    try {
        size_t total = 1;
        for (int64_t d : read_idx_dims(path, rank)) {
            total *= static_cast<size_t>(d);
            if (total > (size_t{1} << 40)) return header;  // refused as over 1 TiB by the checks after
        }
        return header + total;
    } catch (const Error&) {
        return header;
    }
}

std::vector<uint8_t> read_bounded(const std::filesystem::path& path, size_t limit, bool* cut) {
    const std::string raw = read_file(path);
    *cut = false;
    if (is_gzip_name(path)) return inflate_gzip(raw, path, limit, cut);
    return std::vector<uint8_t>(raw.begin(), raw.end());
}

}  // namespace

std::vector<uint8_t> read_maybe_gzip(const std::filesystem::path& path) {
    bool cut = false;
    return read_bounded(path, SIZE_MAX - 1, &cut);
}

std::vector<int64_t> read_idx_dims(const std::filesystem::path& path, int rank) {
    const std::string name = path.string();
    const int want = 4 + 4 * rank;
    uint8_t head[4 + 4 * 4] = {};
    if (rank < 1 || rank > 4) throw FormatError(fmt::format("'{}': rank {} is not 1..4", name, rank));
    gzFile f = gzopen(name.c_str(), "rb");  // reads raw files as they are, inflates gzip ones
    if (!f) throw IoError(fmt::format("'{}': cannot open", name));
    const int got = gzread(f, head, static_cast<unsigned>(want));
    gzclose(f);
    if (got < 0) throw FormatError(fmt::format("'{}': cannot read the IDX header (bad gzip data?)", name));
    if (got < 4 || head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] != rank)
        throw FormatError(fmt::format(
            "'{}': offset 0: expected the IDX magic 00 00 08 {:02x} (unsigned bytes, rank {})", name, rank, rank));
    if (got < want)
        throw FormatError(fmt::format("'{}': truncated at offset {}: the header of {} dimensions needs {} bytes", name,
                                      got, rank, want));
    std::vector<int64_t> dims;
    for (int d = 0; d < rank; ++d) {
        dims.push_back(be32(&head[4 + 4 * d]));
        if (dims.back() == 0) throw FormatError(fmt::format("'{}': offset {}: dimension {} is 0", name, 4 + 4 * d, d));
    }
    return dims;
}

IdxArray read_idx(const std::filesystem::path& path, int rank) {
    bool cut = false;
    const std::vector<uint8_t> bytes =
        read_bounded(path, is_gzip_name(path) ? declared_idx_bytes(path, rank) : SIZE_MAX - 1, &cut);
    const std::string name = path.string();
    if (bytes.size() < 4)
        throw FormatError(fmt::format("'{}': truncated at offset {}: an IDX file starts with a 4-byte magic", name,
                                      bytes.size()));
    if (bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08)
        throw FormatError(
            fmt::format("'{}': wrong magic at offset 0: expected 00 00 08 {:02x} (IDX of unsigned bytes, "
                        "rank {}), found {:02x} {:02x} {:02x} {:02x}",
                        name, rank, rank, bytes[0], bytes[1], bytes[2], bytes[3]));
    if (bytes[3] != rank)
        throw FormatError(fmt::format("'{}': offset 3: expected rank {} ({}), found rank {}", name, rank,
                                      rank == 1 ? "labels" : "images", bytes[3]));
    const size_t header = 4 + 4 * static_cast<size_t>(rank);
    if (bytes.size() < header)
        throw FormatError(fmt::format("'{}': truncated at offset {}: the header of {} dimensions needs {} bytes", name,
                                      bytes.size(), rank, header));
    IdxArray a;
    uint64_t total = 1;
    for (int d = 0; d < rank; ++d) {
        const uint32_t n = be32(&bytes[4 + 4 * d]);
        if (n == 0) throw FormatError(fmt::format("'{}': offset {}: dimension {} is 0", name, 4 + 4 * d, d));
        a.dims.push_back(n);
        total *= n;
        if (total > (uint64_t{1} << 40))
            throw FormatError(
                fmt::format("'{}': dimensions {} describe more than 1 TiB", name, fmt::join(a.dims, "x")));
    }
    const uint64_t have = bytes.size() - header;
    if (have < total)
        throw FormatError(
            fmt::format("'{}': truncated at offset {}: dimensions {} need {} data bytes after the {}-byte "
                        "header (file size {}), found {}",
                        name, bytes.size(), fmt::join(a.dims, "x"), total, header, header + total, have));
    if (have > total && cut)
        throw FormatError(
            fmt::format("'{}': offset {}: more data after what dimensions {} describe ({} bytes with the "
                        "{}-byte header); a .gz is inflated no further than its header declares",
                        name, header + total, fmt::join(a.dims, "x"), header + total, header));
    if (have > total)
        throw FormatError(fmt::format("'{}': offset {}: {} bytes after the data that dimensions {} describe", name,
                                      header + total, have - total, fmt::join(a.dims, "x")));
    a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
    return a;
}

}  // namespace llmt::data
