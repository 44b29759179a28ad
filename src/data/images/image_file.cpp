#include "data/images/image_file.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cctype>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/fs.h"
#include "data/images/idx.h"

namespace llmt::data {

namespace {

[[noreturn]] void bad(const std::filesystem::path& p, const std::string& why) {
    throw FormatError(fmt::format("'{}': {}", p.string(), why));
}

// PGM: "P5"/"P2", whitespace and #-comments, width, height, maxval, then the pixels.
GreyImages read_pgm(const std::filesystem::path& p, const std::string& s) {
    size_t at = 2;
    auto next_number = [&]() -> long {
        while (at < s.size()) {
            if (s[at] == '#') {
                while (at < s.size() && s[at] != '\n') ++at;
            } else if (std::isspace(static_cast<unsigned char>(s[at]))) {
                ++at;
            } else {
                break;
            }
        }
        size_t end = at;
        while (end < s.size() && std::isdigit(static_cast<unsigned char>(s[end]))) ++end;
        if (end == at) bad(p, fmt::format("PGM header: expected a number at offset {}", at));
        const long v = std::strtol(s.substr(at, end - at).c_str(), nullptr, 10);
        at = end;
        return v;
    };
    const long w = next_number(), h = next_number(), maxval = next_number();
    if (w <= 0 || h <= 0 || w > 65535 || h > 65535) bad(p, fmt::format("PGM size {}x{} is not usable", w, h));
    if (maxval <= 0 || maxval > 255) bad(p, fmt::format("PGM maxval {} (only 8-bit images, maxval <= 255)", maxval));
    GreyImages g;
    g.H = static_cast<int>(h);
    g.W = static_cast<int>(w);
    std::vector<uint8_t> px(static_cast<size_t>(w * h));
    auto scale = [&](long v) { return static_cast<uint8_t>((v * 255 + maxval / 2) / maxval); };
    if (s[1] == '5') {
        ++at;  // the one whitespace byte after maxval
        if (s.size() < at + px.size())
            bad(p, fmt::format("truncated at offset {}: {}x{} pixels need {} bytes from offset {}", s.size(), w, h,
                               px.size(), at));
        for (size_t i = 0; i < px.size(); ++i) px[i] = scale(static_cast<unsigned char>(s[at + i]));
    } else {
        for (auto& v : px) {
            const long x = next_number();
            if (x > maxval) bad(p, fmt::format("pixel {} above maxval {} at offset {}", x, maxval, at));
            v = scale(x);
        }
    }
    g.images.push_back(std::move(px));
    return g;
}

uint32_t be32(const std::string& s, size_t at) {
    return (uint32_t{static_cast<unsigned char>(s[at])} << 24) |
           (uint32_t{static_cast<unsigned char>(s[at + 1])} << 16) |
           (uint32_t{static_cast<unsigned char>(s[at + 2])} << 8) | uint32_t{static_cast<unsigned char>(s[at + 3])};
}

int paeth(int a, int b, int c) {
    const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
    return pa <= pb && pa <= pc ? a : (pb <= pc ? b : c);
}

// PNG: chunks after the 8-byte signature; IHDR, the IDAT data inflated, each row's filter undone.
GreyImages read_png(const std::filesystem::path& p, const std::string& s) {
    size_t at = 8;
    uint32_t w = 0, h = 0;
    int channels = 0;
    std::string idat;
    bool ended = false;
    while (!ended) {
        if (at + 8 > s.size()) bad(p, fmt::format("truncated at offset {}: expected a PNG chunk", s.size()));
        const uint32_t len = be32(s, at);
        const std::string type = s.substr(at + 4, 4);
        if (at + 12 + static_cast<size_t>(len) > s.size())
            bad(p, fmt::format("truncated at offset {}: chunk {} at offset {} needs {} bytes", s.size(), type, at,
                               len + 12));
        const std::string body = s.substr(at + 8, len);
        if (type == "IHDR") {
            if (len != 13) bad(p, "IHDR is not 13 bytes");
            w = be32(body, 0);
            h = be32(body, 4);
            const int depth = static_cast<unsigned char>(body[8]), colour = static_cast<unsigned char>(body[9]);
            const int interlace = static_cast<unsigned char>(body[12]);
            channels = colour == 0 ? 1 : colour == 4 ? 2 : colour == 2 ? 3 : colour == 6 ? 4 : 0;
            if (depth != 8 || channels == 0 || interlace != 0)
                bad(p, fmt::format("PNG with bit depth {}, colour type {}, interlace {}: only 8-bit grey, grey+alpha, "
                                   "RGB or RGBA without interlacing is read",
                                   depth, colour, interlace));
        } else if (type == "IDAT") {
            idat += body;
        } else if (type == "IEND") {
            ended = true;
        }
        at += 12 + len;
    }
    if (w == 0 || h == 0 || w > 65535 || h > 65535) bad(p, "PNG without a usable IHDR");
    const size_t stride = static_cast<size_t>(w) * static_cast<size_t>(channels);
    std::vector<uint8_t> raw((stride + 1) * h);
    uLongf n = static_cast<uLongf>(raw.size());
    if (uncompress(raw.data(), &n, reinterpret_cast<const Bytef*>(idat.data()), static_cast<uLong>(idat.size())) !=
            Z_OK ||
        n != raw.size())
        bad(p, "PNG image data does not inflate to its size");
    std::vector<uint8_t> cur(stride), prev(stride, 0);
    GreyImages g;
    g.H = static_cast<int>(h);
    g.W = static_cast<int>(w);
    std::vector<uint8_t> px(static_cast<size_t>(w) * h);
    for (uint32_t y = 0; y < h; ++y) {
        const uint8_t filter = raw[y * (stride + 1)];
        const uint8_t* in = &raw[y * (stride + 1) + 1];
        for (size_t i = 0; i < stride; ++i) {
            const int a = i >= static_cast<size_t>(channels) ? cur[i - channels] : 0, b = prev[i],
                      c = i >= static_cast<size_t>(channels) ? prev[i - channels] : 0;
            int v = in[i];
            switch (filter) {
                case 0: break;
                case 1: v += a; break;
                case 2: v += b; break;
                case 3: v += (a + b) / 2; break;
                case 4: v += paeth(a, b, c); break;
                default: bad(p, fmt::format("PNG row {} has filter type {}", y, filter));
            }
            cur[i] = static_cast<uint8_t>(v);
        }
        for (uint32_t x = 0; x < w; ++x) {
            const uint8_t* q = &cur[static_cast<size_t>(x) * channels];
            px[static_cast<size_t>(y) * w + x] =
                channels <= 2 ? q[0] : static_cast<uint8_t>((299 * q[0] + 587 * q[1] + 114 * q[2] + 500) / 1000);
        }
        prev.swap(cur);
    }
    g.images.push_back(std::move(px));
    return g;
}

}  // namespace

GreyImages read_images_for_prediction(const std::filesystem::path& path) {
    const std::string all = read_file(path);
    const std::string head = all.substr(0, 8);
    if (head.size() >= 2 && head[0] == 'P' && (head[1] == '5' || head[1] == '2')) return read_pgm(path, all);
    if (head.size() == 8 && head == std::string("\x89PNG\r\n\x1a\n", 8)) return read_png(path, all);
    const bool gz =
        head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f && static_cast<unsigned char>(head[1]) == 0x8b;
    if (gz || (head.size() >= 4 && head[0] == 0 && head[1] == 0 && head[2] == 8)) {
        if (gz && path.extension() != ".gz") bad(path, "gzip data: name the file *.gz");
        IdxArray a = read_idx(path, 3);
        GreyImages g;
        g.H = static_cast<int>(a.dims[1]);
        g.W = static_cast<int>(a.dims[2]);
        const size_t each = static_cast<size_t>(a.item_size());
        for (int64_t i = 0; i < a.items(); ++i)
            g.images.emplace_back(a.data.begin() + static_cast<std::ptrdiff_t>(i * each),
                                  a.data.begin() + static_cast<std::ptrdiff_t>((i + 1) * each));
        return g;
    }
    bad(path, "not an IDX file of images, a PGM (P5/P2) or a PNG");
}

}  // namespace llmt::data
