// IDX files and the image sampler (data/images/idx.h, data/images/image_set.h): raw and gzip files read back;
// truncated files and wrong magics are FormatErrors naming the file and the offset; DistributedSampler's sharding
// (padding by repetition, the last partial batch); the split and the augmentation are deterministic.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fs.h"
#include "data/images/idx.h"
#include "data/images/image_file.h"
#include "data/images/image_set.h"

namespace llmt::data {
namespace {

namespace fs = std::filesystem;

std::string idx_bytes(std::vector<uint32_t> dims, int fill_items = -1) {
    std::string s = {0, 0, 8, static_cast<char>(dims.size())};
    size_t n = 1;
    for (uint32_t d : dims) {
        n *= d;
        for (int k = 3; k >= 0; --k) s.push_back(static_cast<char>((d >> (8 * k)) & 0xff));
    }
    if (fill_items >= 0) n = static_cast<size_t>(fill_items);
    for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(i % 251));
    return s;
}

std::string gzip(const std::string& raw) {
    z_stream zs{};
    deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    std::string out(raw.size() + 1024, '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
    zs.avail_in = static_cast<uInt>(raw.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    deflate(&zs, Z_FINISH);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    return out;
}

struct TempDir {
    fs::path path = fs::temp_directory_path() / fmt::format("llmt_idx_{}_{}", ::getpid(), counter()++);
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
    static int& counter() {
        static int c = 0;
        return c;
    }
};

std::string error_of(const fs::path& p, int rank) {
    try {
        (void)read_idx(p, rank);
    } catch (const FormatError& e) {
        return e.what();
    }
    return "";
}

TEST(Idx, ReadsRawAndGzip) {
    TempDir d;
    write_file_atomic(d.path / "a.idx", idx_bytes({3, 2, 2}));
    write_file_atomic(d.path / "a.idx.gz", gzip(idx_bytes({3, 2, 2})));
    for (const char* name : {"a.idx", "a.idx.gz"}) {
        const IdxArray a = read_idx(d.path / name, 3);
        EXPECT_EQ(a.dims, (std::vector<int64_t>{3, 2, 2}));
        ASSERT_EQ(a.data.size(), 12u);
        EXPECT_EQ(a.data[11], 11);
    }
}

TEST(Idx, TruncationNamesFileAndOffset) {
    TempDir d;
    const auto p = d.path / "short.idx";
    write_file_atomic(p, idx_bytes({3, 2, 2}, 7));  // 12 data bytes promised, 7 present: ends at 16 + 7
    const std::string e = error_of(p, 3);
    EXPECT_NE(e.find(p.string()), std::string::npos) << e;
    EXPECT_NE(e.find("truncated at offset 23"), std::string::npos) << e;
    write_file_atomic(p, idx_bytes({3, 2, 2}).substr(0, 10));  // inside the header
    EXPECT_NE(error_of(p, 3).find("truncated at offset 10"), std::string::npos) << error_of(p, 3);
    const auto gz = d.path / "short.idx.gz";
    const std::string packed = gzip(idx_bytes({50, 10, 10}));
    write_file_atomic(gz, packed.substr(0, packed.size() / 2));
    EXPECT_NE(error_of(gz, 3).find("truncated gzip stream at compressed offset"), std::string::npos)
        << error_of(gz, 3);
}

TEST(Idx, WrongMagicRankAndTrailingBytes) {
    TempDir d;
    const auto p = d.path / "x.idx";
    std::string s = idx_bytes({4});
    s[2] = 0x0d;  // float elements
    write_file_atomic(p, s);
    EXPECT_NE(error_of(p, 1).find("wrong magic at offset 0"), std::string::npos) << error_of(p, 1);
    write_file_atomic(p, idx_bytes({4}));
    EXPECT_NE(error_of(p, 3).find("expected rank 3"), std::string::npos) << error_of(p, 3);
    write_file_atomic(p, idx_bytes({4}) + "xy");
    EXPECT_NE(error_of(p, 1).find("2 bytes after the data"), std::string::npos) << error_of(p, 1);
}

// The header alone (what an estimate reads to size an epoch): the dimensions of raw and gzip files,
// whatever follows; a wrong magic or rank, a short header and a zero dimension are FormatErrors.
TEST(Idx, DimsFromTheHeaderAlone) {
    TempDir d;
    write_file_atomic(d.path / "a.idx", idx_bytes({60000, 28, 28}, 5));  // the data is not read
    write_file_atomic(d.path / "a.idx.gz", gzip(idx_bytes({3, 2, 2})));
    EXPECT_EQ(read_idx_dims(d.path / "a.idx", 3), (std::vector<int64_t>{60000, 28, 28}));
    EXPECT_EQ(read_idx_dims(d.path / "a.idx.gz", 3), (std::vector<int64_t>{3, 2, 2}));
    auto error = [](const fs::path& p, int rank) {
        try {
            (void)read_idx_dims(p, rank);
        } catch (const FormatError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(error(d.path / "a.idx", 1).find("expected the IDX magic 00 00 08 01"), std::string::npos);
    write_file_atomic(d.path / "short.idx", idx_bytes({3, 2, 2}).substr(0, 10));
    EXPECT_NE(error(d.path / "short.idx", 3).find("truncated at offset 10"), std::string::npos)
        << error(d.path / "short.idx", 3);
    write_file_atomic(d.path / "zero.idx", idx_bytes({0, 2, 2}));
    EXPECT_NE(error(d.path / "zero.idx", 3).find("dimension 0 is 0"), std::string::npos)
        << error(d.path / "zero.idx", 3);
    EXPECT_THROW((void)read_idx_dims(d.path / "missing.idx", 3), IoError);
}

// The peak resident memory of this process since the last reset_peak_rss(), in KiB.
int64_t peak_rss_kb() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
    return -1;
}
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// A .gz whose 28x28 header declares 10 images (7,840 bytes) but that inflates to 200 MB: refused as
// more data than declared, having inflated no more than that (the peak RSS grows < 100 MB, the bound
// for this case; inflating all of it would add 200 MB).
TEST(Idx, GzipInflationStopsAtTheDeclaredSize) {
    TempDir d;
    const fs::path bomb = d.path / "bomb-images-idx3-ubyte.gz";
    {
        gzFile g = gzopen(bomb.c_str(), "wb9");
        ASSERT_NE(g, nullptr);
        const std::string head = idx_bytes({10, 28, 28}, 0);
        gzwrite(g, head.data(), static_cast<unsigned>(head.size()));
        const std::string zeros(1 << 20, '\0');
        for (int i = 0; i < 200; ++i) gzwrite(g, zeros.data(), static_cast<unsigned>(zeros.size()));
        gzclose(g);
    }
    ASSERT_LT(fs::file_size(bomb), 2u << 20);
    reset_peak_rss();
    const int64_t before = peak_rss_kb();
    try {
        read_idx(bomb, 3);
        FAIL() << "accepted";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("more data after what dimensions 10x28x28 describe"), std::string::npos)
            << e.what();
    }
    if (before > 0) {
        EXPECT_LT(peak_rss_kb() - before, 100 << 10);
    }
    // Exactly the declared size still reads.
    const fs::path ok = d.path / "ok-images-idx3-ubyte.gz";
    write_file_atomic(ok, gzip(idx_bytes({10, 28, 28})));
    EXPECT_EQ(read_idx(ok, 3).data.size(), 7840u);
}

TEST(ImageSet, LabelsBeyondTheClassesAreRefused) {
    TempDir d;
    write_file_atomic(d.path / "i.idx", idx_bytes({3, 2, 2}));
    std::string labels = idx_bytes({3}, 0);
    labels += std::string{1, 2, 12};
    write_file_atomic(d.path / "l.idx", labels);
    try {
        (void)load_image_set(d.path / "i.idx", d.path / "l.idx", 10);
        FAIL() << "accepted label 12 with 10 classes";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("label 12 at offset 10"), std::string::npos) << e.what();
    }
}

// torch's DistributedSampler: 10 items over 3 ranks -> 4 each, items 0 and 1 repeated; batches of 3
// leave a last batch of 1.
TEST(EpochSampler, ShardsLikeDistributedSampler) {
    std::vector<int64_t> idx(10);
    std::iota(idx.begin(), idx.end(), 0);
    std::multiset<int64_t> seen;
    for (int r = 0; r < 3; ++r) {
        EpochSampler s(idx, 1, /*shuffle=*/false, r, 3, 3);
        EXPECT_EQ(s.per_rank(), 4);
        EXPECT_EQ(s.batches_per_epoch(), 2);
        EXPECT_EQ(s.rows(1), 1);
        const auto b0 = s.batch(0, 0), b1 = s.batch(0, 1);
        EXPECT_EQ(b0[0], r);  // rank r takes r, r + 3, ...
        seen.insert(b0.begin(), b0.end());
        seen.insert(b1.begin(), b1.end());
    }
    EXPECT_EQ(seen.size(), 12u);
    EXPECT_EQ(seen.count(0), 2u);
    EXPECT_EQ(seen.count(1), 2u);
    // Shuffled: a permutation per epoch, the same for the same seed.
    EpochSampler a(idx, 9, true, 0, 1, 10), b(idx, 9, true, 0, 1, 10);
    EXPECT_EQ(a.batch(0, 0), b.batch(0, 0));
    EXPECT_NE(a.batch(0, 0), a.batch(1, 0));
    auto sorted = a.batch(1, 0);
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, idx);
}

TEST(Augment, CropAndFlipAreDeterministicAndMovePixels) {
    std::vector<uint8_t> in(16), out1(16), out2(16);
    std::iota(in.begin(), in.end(), 1);
    Augment a;
    a.crop_padding = 1;
    a.hflip = true;
    bool changed = false;
    for (int64_t i = 0; i < 8; ++i) {
        augment_image(out1.data(), in.data(), 4, 4, 1, a, 5, 0, i);
        augment_image(out2.data(), in.data(), 4, 4, 1, a, 5, 0, i);
        EXPECT_EQ(out1, out2);
        changed = changed || out1 != in;
    }
    EXPECT_TRUE(changed);
    Augment flip_only;
    flip_only.hflip = true;
    for (int64_t i = 0; i < 8; ++i) {  // a flip is a permutation of each row
        augment_image(out1.data(), in.data(), 4, 4, 1, flip_only, 5, 0, i);
        EXPECT_TRUE(out1 == in || (out1[0] == in[3] && out1[3] == in[0] && out1[15] == in[12]));
    }
}

TEST(Split, DisjointAndComplete) {
    const Split s = split_indices(100, 0.1, 3);
    EXPECT_EQ(s.val.size(), 10u);
    EXPECT_EQ(s.train.size(), 90u);
    std::set<int64_t> all(s.train.begin(), s.train.end());
    all.insert(s.val.begin(), s.val.end());
    EXPECT_EQ(all.size(), 100u);
}

}  // namespace
}  // namespace llmt::data

namespace llmt::data {
namespace {

// A PNG of 3x2 RGB pixels, rows filtered with Sub and Paeth, reads back as the luma of each pixel.
TEST(ImageFile, PngAndPgmDecode) {
    TempDir d;
    const uint8_t rgb[2][9] = {{10, 20, 30, 200, 100, 50, 0, 0, 0}, {255, 255, 255, 1, 2, 3, 90, 90, 90}};
    std::string raw;
    raw.push_back(1);  // Sub
    for (int i = 0; i < 9; ++i) raw.push_back(static_cast<char>(rgb[0][i] - (i >= 3 ? rgb[0][i - 3] : 0)));
    raw.push_back(4);  // Paeth
    auto paeth = [](int a, int b, int c) {
        const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
        return pa <= pb && pa <= pc ? a : (pb <= pc ? b : c);
    };
    for (int i = 0; i < 9; ++i) {
        const int a = i >= 3 ? rgb[1][i - 3] : 0, b = rgb[0][i], c = i >= 3 ? rgb[0][i - 3] : 0;
        raw.push_back(static_cast<char>(rgb[1][i] - paeth(a, b, c)));
    }
    uLongf n = compressBound(raw.size());
    std::string z(n, '\0');
    compress(reinterpret_cast<Bytef*>(z.data()), &n, reinterpret_cast<const Bytef*>(raw.data()), raw.size());
    z.resize(n);
    auto chunk = [](const std::string& type, const std::string& body) {
        std::string c;
        for (int k = 3; k >= 0; --k) c.push_back(static_cast<char>((body.size() >> (8 * k)) & 0xff));
        c += type + body + std::string(4, '\0');  // the CRC is not checked
        return c;
    };
    const std::string ihdr = std::string("\0\0\0\3\0\0\0\2\x08\x02\0\0\0", 13);
    write_file_atomic(d.path / "x.png", std::string("\x89PNG\r\n\x1a\n", 8) + chunk("IHDR", ihdr) + chunk("IDAT", z) +
                                            chunk("IEND", ""));
    const GreyImages g = read_images_for_prediction(d.path / "x.png");
    ASSERT_EQ(g.images.size(), 1u);
    EXPECT_EQ(g.W, 3);
    EXPECT_EQ(g.H, 2);
    for (int p = 0; p < 6; ++p) {
        const uint8_t* q = rgb[p / 3] + 3 * (p % 3);
        EXPECT_EQ(g.images[0][static_cast<size_t>(p)], (299 * q[0] + 587 * q[1] + 114 * q[2] + 500) / 1000) << p;
    }
    write_file_atomic(d.path / "x.pgm", "P2\n2 1\n15\n0 15\n");
    const GreyImages h = read_images_for_prediction(d.path / "x.pgm");
    EXPECT_EQ(h.images[0], (std::vector<uint8_t>{0, 255}));
    write_file_atomic(d.path / "short.pgm", "P5\n4 4\n255\nab");
    EXPECT_THROW((void)read_images_for_prediction(d.path / "short.pgm"), FormatError);
}

}  // namespace
}  // namespace llmt::data
