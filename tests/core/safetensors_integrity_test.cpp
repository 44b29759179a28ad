// Per-tensor checksums and finiteness (core/safetensors_integrity.h): the writer records a CRC-32C per
// tensor that Hugging Face-style readers ignore, a flipped bit or a NaN is refused naming the tensor.
#include "core/safetensors_integrity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "core/safetensors.h"

using namespace llmt;

namespace {

std::filesystem::path temp_file(const std::string& name) {
    auto d = std::filesystem::temp_directory_path() / ("llmt_integrity_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d / name;
}

// Two tensors written by our writer; returns the file's bytes.
std::string written(std::vector<float> a, std::vector<std::uint16_t> b = {0x3f80, 0x4000}) {
    auto p = temp_file("w.safetensors");
    write_safetensors(p,
                      {{"layer.weight", StDType::kF32, {static_cast<std::int64_t>(a.size())}, a.data()},
                       {"layer.bias", StDType::kBF16, {static_cast<std::int64_t>(b.size())}, b.data()}},
                      {{"format", "pt"}});
    return read_file(p);
}

// A file with one F32 tensor "t" = 1.0 and the given __metadata__ entries, bypassing the writer.
std::string hand_made(const std::string& meta) {
    const float v = 1.f;
    std::string h = "{\"__metadata__\":{" + meta + "},\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    std::string out(8, '\0');
    const std::uint64_t n = h.size();
    std::memcpy(out.data(), &n, 8);
    std::string data(4, '\0');
    std::memcpy(data.data(), &v, 4);
    return out + h + data;
}

template <typename F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const FormatError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(SafetensorsIntegrity, WriterRecordsChecksumsThatVerify) {
    auto f = SafetensorsFile::from_bytes(written({1.f, 2.f, 3.f}), "w");
    EXPECT_TRUE(has_checksums(f));
    EXPECT_EQ(f.metadata().at("format"), "pt");  // the caller's metadata is kept
    EXPECT_EQ(f.metadata().at("llmtrain.crc32c.layer.weight").rfind("crc32c:", 0), 0u);
    EXPECT_NO_THROW(verify_tensors(f, Checksums::kRequired));
}

TEST(SafetensorsIntegrity, FlippedBitNamesTheTensor) {
    std::string bytes = written({1.f, 2.f, 3.f});
    auto f = SafetensorsFile::from_bytes(bytes, "w");
    const auto off = f.info("layer.weight").offset;
    bytes[off + 1] ^= 0x10;  // a mantissa bit of 1.0f: still finite
    auto g = SafetensorsFile::from_bytes(bytes, "flipped.safetensors");
    const std::string msg = message_of([&] { verify_tensors(g, Checksums::kIfPresent); });
    EXPECT_NE(msg.find("flipped.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'layer.weight' fails its checksum"), std::string::npos) << msg;
}

TEST(SafetensorsIntegrity, NonFiniteNamesTensorAndIndex) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    auto f = SafetensorsFile::from_bytes(written({1.f, 2.f, nan, 4.f}), "nan.safetensors");
    std::string msg = message_of([&] { verify_tensors(f, Checksums::kRequired); });
    EXPECT_NE(msg.find("'layer.weight'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(nan) at flat index 2"), std::string::npos) << msg;
    // Past the first 256-element block, and -inf.
    std::vector<float> big(1000, 0.5f);
    big[777] = -inf;
    auto g = SafetensorsFile::from_bytes(written(big), "inf.safetensors");
    msg = message_of([&] { verify_tensors(g, Checksums::kIfPresent); });
    EXPECT_NE(msg.find("(-inf) at flat index 777"), std::string::npos) << msg;
    // bf16 infinity (0x7f80) in the second tensor.
    auto h = SafetensorsFile::from_bytes(written({1.f}, {0x3f80, 0x3f80, 0x7f80}), "bf16.safetensors");
    msg = message_of([&] { verify_tensors(h, Checksums::kIfPresent); });
    EXPECT_NE(msg.find("'layer.bias' (BF16 [3]) holds a non-finite value (inf) at flat index 2"), std::string::npos)
        << msg;
}

// F8: E4M3's only NaN is all seven low bits set (no infinity); E5M2 has IEEE infinities.
TEST(SafetensorsIntegrity, NonFiniteF8) {
    const std::uint8_t e4m3[] = {0x00, 0x7e, 0xfe, 0xff}, e5m2[] = {0x3c, 0x7b, 0xfc};
    const auto p = temp_file("f8.safetensors");
    write_safetensors(p, {{"a", StDType::kF8E4M3, {4}, e4m3}, {"b", StDType::kF8E5M2, {3}, e5m2}});
    const std::string msg = message_of([&] { verify_tensors(SafetensorsFile::open(p), Checksums::kRequired); });
    EXPECT_NE(msg.find("'a' (F8_E4M3 [4]) holds a non-finite value (nan) at flat index 3"), std::string::npos) << msg;
    const std::uint8_t fine[] = {0x00, 0x7e, 0xfe, 0x01};
    write_safetensors(p, {{"a", StDType::kF8E4M3, {4}, fine}, {"b", StDType::kF8E5M2, {3}, e5m2}});
    const std::string msg_b = message_of([&] { verify_tensors(SafetensorsFile::open(p), Checksums::kRequired); });
    EXPECT_NE(msg_b.find("'b' (F8_E5M2 [3]) holds a non-finite value (-inf) at flat index 2"), std::string::npos)
        << msg_b;
}

// Files from elsewhere (no checksums) load with kIfPresent; our checkpoints require them.
TEST(SafetensorsIntegrity, MissingChecksums) {
    auto g = SafetensorsFile::from_bytes(hand_made("\"format\":\"pt\""), "hf.safetensors");
    EXPECT_FALSE(has_checksums(g));
    EXPECT_NO_THROW(verify_tensors(g, Checksums::kIfPresent));
    const std::string msg = message_of([&] { verify_tensors(g, Checksums::kRequired); });
    EXPECT_NE(msg.find("'t' has no checksum"), std::string::npos) << msg;
}

TEST(SafetensorsIntegrity, MalformedOrDanglingEntries) {
    const float v = 1.f;
    auto p = temp_file("meta.safetensors");
    write_safetensors(p, {{"t", StDType::kF32, {1}, &v}}, {});
    auto ok = SafetensorsFile::open(p);
    EXPECT_NO_THROW(verify_tensors(ok, Checksums::kRequired));
    // The writer replaces a caller's entry for a tensor it writes, so bad ones are made by hand.
    const auto header_with = hand_made;
    auto bad = SafetensorsFile::from_bytes(header_with("\"llmtrain.crc32c.t\":\"crc32c:xyz\""), "bad");
    EXPECT_NE(message_of([&] { verify_tensors(bad, Checksums::kIfPresent); }).find("expected 'crc32c:'"),
              std::string::npos);
    auto dangling = SafetensorsFile::from_bytes(
        header_with("\"llmtrain.crc32c.t\":\"" + ok.metadata().at("llmtrain.crc32c.t") +
                    "\",\"llmtrain.crc32c.gone\":\"crc32c:00000000\""),
        "dangling");
    EXPECT_NE(message_of([&] { verify_tensors(dangling, Checksums::kIfPresent); }).find("tensor 'gone'"),
              std::string::npos);
}
