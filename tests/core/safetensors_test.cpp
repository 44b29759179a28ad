// safetensors reader/writer: round trips, every corruption class gives FormatError, and a seeded
// in-process fuzz loop (tests/fuzz/safetensors_fuzz.cpp is the libFuzzer version of it).
#include "core/safetensors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "core/fs.h"

namespace fs = std::filesystem;
using namespace llmt;

namespace {

fs::path temp_dir() {
    static fs::path d = [] {
        fs::path p = fs::temp_directory_path() / ("llmt_safetensors_test_" + std::to_string(::getpid()));
        fs::create_directories(p);
        return p;
    }();
    return d;
}

// A file assembled from a raw header string and data bytes, bypassing the writer.
std::string make_file(const std::string& header, const std::string& data, std::uint64_t hlen_override = ~0ull) {
    std::uint64_t n = hlen_override == ~0ull ? header.size() : hlen_override;
    std::string out(8, '\0');
    std::memcpy(out.data(), &n, 8);
    return out + header + data;
}

// A valid file with three tensors, written by our writer, as bytes.
std::string valid_bytes() {
    static std::string bytes = [] {
        std::vector<float> a = {1, 2, 3, 4, 5, 6};
        std::vector<std::int64_t> ids = {7, -8};
        std::vector<std::uint16_t> h = {0x3f80, 0xc000};  // bf16 1.0, -2.0
        auto p = temp_dir() / "valid.safetensors";
        write_safetensors(p, {{"a", StDType::kF32, {2, 3}, a.data()},
                              {"h", StDType::kBF16, {2}, h.data()},
                              {"ids", StDType::kI64, {2}, ids.data()}},
                          {{"k", "v"}});
        return read_file(p);
    }();
    return bytes;
}

void expect_format_error(const std::string& bytes, const std::string& needle) {
    try {
        SafetensorsFile::from_bytes(bytes, "bad.safetensors");
        ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const FormatError& e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << msg;
        EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg << "\nexpected to contain: " << needle;
    }
}

}  // namespace

TEST(Safetensors, RoundTripAllDtypesAndMetadata) {
    std::vector<float> w(12);
    for (int i = 0; i < 12; ++i) w[i] = 0.5f * i - 3;
    std::vector<std::uint16_t> bf = {0x3f80, 0x4000, 0xbf80};
    std::vector<std::int32_t> i32 = {1, -2, 3};
    std::vector<std::int64_t> i64 = {1LL << 40};
    std::vector<std::uint8_t> u8 = {9, 8, 7, 6, 5};
    float scalar = 42.f;
    auto p = temp_dir() / "rt.safetensors";
    std::vector<TensorRef> ts = {
        {"w", StDType::kF32, {3, 4}, w.data()},      {"u8", StDType::kU8, {5}, u8.data()},
        {"bf", StDType::kBF16, {3}, bf.data()},      {"i64", StDType::kI64, {1}, i64.data()},
        {"i32", StDType::kI32, {3}, i32.data()},     {"scalar", StDType::kF32, {}, &scalar},
        {"empty", StDType::kF32, {0, 7}, nullptr},
    };
    write_safetensors(p, ts, {{"format", "pt"}, {"step", "12"}});
    auto f = SafetensorsFile::open(p);
    ASSERT_EQ(f.size(), ts.size());
    // Data order: 8-byte dtypes first, then 4, 2, 1; given order within a size.
    EXPECT_EQ(f.names(), (std::vector<std::string>{"i64", "w", "i32", "scalar", "empty", "bf", "u8"}));
    EXPECT_EQ(f.metadata().at("format"), "pt");
    EXPECT_EQ(f.metadata().at("step"), "12");
    for (const auto& t : ts) {
        const auto& info = f.info(t.name);
        EXPECT_EQ(info.dtype, t.dtype) << t.name;
        EXPECT_EQ(info.shape, t.shape) << t.name;
        EXPECT_EQ(info.offset % st_dtype_size(t.dtype), 0u) << t.name << " not naturally aligned";
        if (info.nbytes) {
            EXPECT_EQ(std::memcmp(f.raw(t.name), t.data, info.nbytes), 0) << t.name;
        }
    }
    std::vector<float> got(12);
    f.read_f32("w", got.data(), {3, 4});
    EXPECT_EQ(got, w);
    std::vector<float> bf32(3);
    f.read_f32("bf", bf32.data(), {3});
    EXPECT_EQ(bf32, (std::vector<float>{1.f, 2.f, -1.f}));
    std::vector<std::int32_t> i32got(3);
    f.read_exact("i32", StDType::kI32, {3}, i32got.data());
    EXPECT_EQ(i32got, i32);

    // Header padded so the data section starts 8-byte aligned, as the safetensors library does.
    std::string bytes = read_file(p);
    std::uint64_t n;
    std::memcpy(&n, bytes.data(), 8);
    EXPECT_EQ((8 + n) % 8, 0u);
    EXPECT_EQ(bytes.substr(8, 15), "{\"__metadata__\"");
    // Deterministic: the same tensors give the same bytes.
    write_safetensors(temp_dir() / "rt2.safetensors", ts, {{"step", "12"}, {"format", "pt"}});
    EXPECT_EQ(read_file(temp_dir() / "rt2.safetensors"), bytes);
    // No temp file left behind.
    for (const auto& e : fs::directory_iterator(temp_dir()))
        EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(Safetensors, AccessorErrorsNameTheProblem) {
    auto f = SafetensorsFile::from_bytes(valid_bytes(), "v.safetensors");
    std::vector<float> buf(6);
    try {
        f.read_f32("a", buf.data(), {3, 2});
        FAIL();
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("has shape [2, 3], expected [3, 2]"), std::string::npos) << e.what();
    }
    try {
        f.info("idz");
        FAIL();
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("did you mean 'ids'"), std::string::npos) << e.what();
    }
    EXPECT_THROW(f.read_f32("ids", buf.data(), {2}), FormatError);  // integers are not converted
    EXPECT_THROW(f.read_exact("a", StDType::kBF16, {2, 3}, buf.data()), FormatError);
    EXPECT_THROW(SafetensorsFile::open(temp_dir() / "does-not-exist"), IoError);
    EXPECT_THROW(SafetensorsFile::open(temp_dir()), FormatError);
}

TEST(Safetensors, WriterRefusesBadInput) {
    float x = 1;
    auto p = temp_dir() / "w.safetensors";
    EXPECT_THROW(write_safetensors(p, {{"a", StDType::kF32, {1}, &x}, {"a", StDType::kF32, {1}, &x}}), InputError);
    EXPECT_THROW(write_safetensors(p, {{"", StDType::kF32, {1}, &x}}), InputError);
    EXPECT_THROW(write_safetensors(p, {{"__metadata__", StDType::kF32, {1}, &x}}), InputError);
    EXPECT_THROW(write_safetensors(p, {{"a", StDType::kF32, {1}, nullptr}}), InputError);
    EXPECT_THROW(write_safetensors(p, {{"a", StDType::kF32, {-1}, &x}}), InputError);
    EXPECT_THROW(write_safetensors(temp_dir() / "no" / "dir" / "x", {{"a", StDType::kF32, {1}, &x}}), IoError);
}

TEST(Safetensors, DiffListsEveryDifference) {
    auto f = SafetensorsFile::from_bytes(valid_bytes(), "v.safetensors");
    auto d =
        diff_tensors(f, {{"a", StDType::kF32, {2, 3}}, {"h", StDType::kF32, {3}}, {"missing", StDType::kF32, {1}}});
    ASSERT_EQ(d.size(), 4u) << fmt::format("{}", fmt::join(d, "\n"));
    EXPECT_EQ(d[0], "tensor 'h' has shape [2], expected [3]");
    EXPECT_EQ(d[1], "tensor 'h' has dtype BF16, expected F32");
    EXPECT_EQ(d[2], "missing tensor 'missing' (expected F32 [1])");
    EXPECT_EQ(d[3], "unexpected tensor 'ids' (I64 [2])");
    // BF16 data where F32 is wanted is fine when the consumer converts.
    auto d2 = diff_tensors(f, {{"a", StDType::kF32, {2, 3}}, {"h", StDType::kF32, {2}}, {"ids", StDType::kI64, {2}}},
                           /*allow_float_conversion=*/true);
    EXPECT_TRUE(d2.empty()) << fmt::format("{}", fmt::join(d2, "\n"));
}

TEST(Safetensors, EveryTruncationIsAFormatError) {
    const std::string v = valid_bytes();
    ASSERT_NO_THROW(SafetensorsFile::from_bytes(v));
    // The data section must be covered exactly, so dropping any suffix (header length, header, data)
    // is detected.
    for (std::size_t len = 0; len < v.size(); ++len) {
        EXPECT_THROW(SafetensorsFile::from_bytes(v.substr(0, len)), FormatError) << "truncated to " << len;
    }
    expect_format_error(v.substr(0, 5), "expected at least 8");
    expect_format_error(v.substr(0, 20), "truncated");
    expect_format_error(v.substr(0, v.size() - 1), "truncated");
    expect_format_error(v + "x", "trailing bytes");
    // The same through open(): a truncated file on disk.
    auto p = temp_dir() / "trunc.safetensors";
    std::ofstream(p, std::ios::binary) << v.substr(0, v.size() - 3);
    EXPECT_THROW(SafetensorsFile::open(p), FormatError);
    std::ofstream(p, std::ios::binary | std::ios::trunc).flush();
    EXPECT_THROW(SafetensorsFile::open(p), FormatError);  // empty file
}

TEST(Safetensors, CorruptHeadersAreFormatErrors) {
    const std::string d8(8, '\0');
    auto T = [](const std::string& body) { return "{" + body + "}"; };
    const std::string ok = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
    ASSERT_NO_THROW(SafetensorsFile::from_bytes(make_file(T(ok), d8)));
    ASSERT_NO_THROW(SafetensorsFile::from_bytes(make_file(T(ok) + "   ", d8)));  // space padding is allowed

    expect_format_error(make_file(T(ok), d8, 1ull << 40), "the format allows at most");
    expect_format_error(make_file(T(ok), d8, 0), "does not start with '{'");
    expect_format_error(make_file(" " + T(ok), d8), "does not start with '{'");
    expect_format_error(make_file("{\"a\":", d8), "not valid JSON");
    expect_format_error(make_file(T(ok) + "x", d8), "not valid JSON");
    expect_format_error(make_file("{\"a\xff\":1}", d8), "not valid JSON");  // invalid UTF-8
    expect_format_error(make_file(R"({"a":[1]})", ""), "expected an object");
    expect_format_error(make_file(T(ok + ",\"a\":" + R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})"), d8),
                        "'a' appears more than once");
    expect_format_error(make_file(T(R"("a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]})"), d8),
                        "unknown dtype 'F31'");
    expect_format_error(make_file(T(R"("a":{"dtype":3,"shape":[2],"data_offsets":[0,8]})"), d8), "'dtype'");
    expect_format_error(make_file(T(R"("a":{"shape":[2],"data_offsets":[0,8]})"), d8), "'dtype'");
    expect_format_error(make_file(T(R"("a":{"dtype":"F32","data_offsets":[0,8]})"), d8), "'shape'");
    expect_format_error(make_file(T(R"("a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), d8),
                        "not a non-negative integer");
    expect_format_error(make_file(T(R"("a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"), d8),
                        "not a non-negative integer");
    expect_format_error(
        make_file(T(R"("a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"), d8),
        "overflows 64 bits");
    expect_format_error(
        make_file(T(R"("a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]})"), d8),
        "overflows 64 bits");
    expect_format_error(make_file(T(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0]})"), d8), "data_offsets");
    expect_format_error(make_file(T(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[-1,8]})"), d8), "data_offsets");
    expect_format_error(make_file(T(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]})"), d8),
                        "end before begin");
    expect_format_error(make_file(T(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]})"), d8),
                        "run past the data section of 8 bytes");
    expect_format_error(make_file(T(R"("a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), d8),
                        "hold 8 bytes, expected 12 (shape [3] x 4 bytes of F32)");
    expect_format_error(make_file(T(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1})"), d8),
                        "unknown field 'x'");
    expect_format_error(make_file(T(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]})"),
                                  d8),
                        "overlaps tensor 'a'");
    expect_format_error(make_file(T(R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]})"), d8),
                        "gap in the data section");
    expect_format_error(make_file(T(R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})"), d8),
                        "trailing bytes");
    expect_format_error(make_file(T(ok + R"(,"__metadata__":{"k":1})"), d8), "expected a string");
    expect_format_error(make_file(T(ok + R"(,"__metadata__":[])"), d8), "\"__metadata__\" must be an object");
}

TEST(Safetensors, ZeroSizedTensorsShareOffsets) {
    auto f = SafetensorsFile::from_bytes(make_file(
        R"({"z1":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
        R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
        R"("z2":{"dtype":"I64","shape":[3,0],"data_offsets":[4,4]}})",
        std::string(4, '\0')));
    EXPECT_EQ(f.names(), (std::vector<std::string>{"z1", "a", "z2"}));
    // Empty tensors read into no buffer at all (the asan preset's UBSan flags a memcpy to null).
    EXPECT_NO_THROW(f.read_exact("z1", StDType::kF32, {0}, nullptr));
    EXPECT_NO_THROW(f.read_f32("z1", nullptr, {0}));
    EXPECT_NO_THROW(f.read_exact("z2", StDType::kI64, {3, 0}, nullptr));
}

// Seeded mutation loop: random byte flips, truncations, insertions and header-length edits. Every
// outcome must be a clean parse (then every tensor is readable) or a FormatError — never a crash, a
// hang or another exception type. Under the asan preset this also checks for out-of-range reads.
TEST(Safetensors, FuzzMutationsNeverCrash) {
    const std::string v = valid_bytes();
    std::mt19937_64 rng(20261126);
    int parsed = 0, rejected = 0;
    for (int iter = 0; iter < 5000; ++iter) {
        std::string m = v;
        int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits; ++e) {
            switch (rng() % 5) {
                case 0:
                case 1:  // flip a byte, biased towards the header where the structure is
                    if (!m.empty())
                        m[rng() % std::min<std::size_t>(m.size(), 200)] ^= static_cast<char>(1 + rng() % 255);
                    break;
                case 2:
                    if (!m.empty()) m.resize(rng() % m.size());
                    break;
                case 3:
                    m.insert(m.begin() + static_cast<long>(rng() % (m.size() + 1)), static_cast<char>(rng() % 256));
                    break;
                case 4:
                    if (m.size() >= 8) m[rng() % 8] = static_cast<char>(rng() % 256);
                    break;
            }
        }
        try {
            auto f = SafetensorsFile::from_bytes(m);
            for (const auto& name : f.names()) {
                const auto& info = f.info(name);
                std::vector<std::uint8_t> buf(info.nbytes);
                f.read_exact(name, info.dtype, info.shape, buf.data());
            }
            ++parsed;
        } catch (const FormatError&) {
            ++rejected;
        }
    }
    EXPECT_GT(rejected, 0);
    EXPECT_GT(parsed + rejected, 4999);
}
