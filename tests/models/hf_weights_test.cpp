// models/hf_weights.h: single and sharded safetensors in (index errors naming the index, the shard and
// the tensor; BF16/F16 widening exact), out (fp32 bit-identical, bf16 round-to-nearest-even, shards above
// a limit with an index), checked against PyTorch by tools/ref/hf_weights_ref.py; and the export
// directory that is written whole or not at all.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/bf16.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/safetensors.h"
#include "models/hf_weights.h"

namespace llmt::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class HfWeightsTest : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() /
                ("hf_weights_" + std::to_string(::getpid()) + "_" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(root_);
        fs::create_directories(root_);
    }
    void TearDown() override { fs::remove_all(root_); }
    fs::path root_;
};

HfWriteOptions opts(HfDType dtype, std::uint64_t max_shard_bytes = 5'000'000'000ULL) {
    HfWriteOptions o;
    o.dtype = dtype;
    o.max_shard_bytes = max_shard_bytes;
    return o;
}

float bits_to_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

std::string error_of(const fs::path& p) {
    try {
        HfWeights::open(p);
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

// Values with known patterns: exact widening is checked value by value (no tolerance: BF16 and F16 are
// subsets of F32, so the conversion has one right answer).
TEST_F(HfWeightsTest, Bf16AndF16WidenExactly) {
    const std::vector<uint16_t> bf16 = {0x3F80, 0xC000, 0x3FC0, 0x0001, 0x8000, 0x7F80, 0x7F7F};
    const std::vector<float> bf16_want = {1.f, -2.f, 1.5f, bits_to_float(0x00010000u), -0.f,
                                          std::numeric_limits<float>::infinity(), bits_to_float(0x7F7F0000u)};
    const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x0001, 0x7BFF, 0x3555, 0x8000};
    const std::vector<float> f16_want = {1.f, -2.f, 0x1p-24f, 65504.f, 0.333251953125f, -0.f};
    write_safetensors(root_ / "model.safetensors",
                      {{"a", StDType::kBF16, {7}, bf16.data()}, {"b", StDType::kF16, {2, 3}, f16.data()}});
    // Not verified: the infinity above is refused by the finiteness check, which is tested below.
    const HfWeights w = HfWeights::open(root_, /*verify=*/false);
    EXPECT_FALSE(w.sharded());
    EXPECT_EQ(w.names(), (std::vector<std::string>{"a", "b"}));
    std::vector<float> a(7), b(6);
    w.read_f32("a", a.data(), {7});
    w.read_f32("b", b.data(), {2, 3});
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(float_bits(a[i]), float_bits(bf16_want[i])) << i;
    for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(float_bits(b[i]), float_bits(f16_want[i])) << i;
    EXPECT_THROW(w.read_f32("b", b.data(), {6}), FormatError);  // another shape
    const std::string e = error_of(root_);
    EXPECT_NE(e.find("'a'"), std::string::npos) << e;  // verify: infinity refused, naming the tensor
}

std::vector<float> random_values(size_t n, uint32_t seed) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.f, 0.05f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

struct Model {
    std::vector<std::vector<float>> values;
    std::vector<HfTensor> tensors;
};

// A toy model's tensors: 4 x (8 x 16) matrices and a bias, 2.1 KiB each in fp32.
Model toy_model() {
    Model m;
    const std::vector<std::pair<std::string, Shape>> specs = {
        {"model.embed_tokens.weight", {16, 8}},         {"model.layers.0.self_attn.q_proj.weight", {8, 8}},
        {"model.layers.0.mlp.gate_proj.weight", {16, 8}}, {"model.layers.1.mlp.down_proj.weight", {8, 16}},
        {"model.norm.weight", {8}},                     {"lm_head.weight", {16, 8}}};
    m.values.reserve(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
        size_t n = 1;
        for (auto d : specs[i].second) n *= static_cast<size_t>(d);
        m.values.push_back(random_values(n, static_cast<uint32_t>(i + 1)));
        m.tensors.push_back({specs[i].first, specs[i].second, m.values.back().data()});
    }
    return m;
}

TEST_F(HfWeightsTest, Fp32RoundTripIsBitIdentical) {
    const Model m = toy_model();
    const auto files = write_hf_weights(root_, m.tensors, opts(HfDType::kF32));
    EXPECT_EQ(files, std::vector<std::string>{"model.safetensors"});
    const HfWeights w = HfWeights::open(root_);
    ASSERT_EQ(w.names().size(), m.tensors.size());
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        std::vector<float> got(m.values[i].size());
        EXPECT_EQ(w.info(m.tensors[i].name).dtype, StDType::kF32);
        w.read_f32(m.tensors[i].name, got.data(), m.tensors[i].shape);
        EXPECT_EQ(std::memcmp(got.data(), m.values[i].data(), got.size() * 4), 0) << m.tensors[i].name;
    }
    EXPECT_EQ(SafetensorsFile::open(root_ / "model.safetensors").metadata().at("format"), "pt");
}

// bf16 keeps 8 significant bits: 1 + 2^-8 lies exactly between 1 and 1 + 2^-7 and rounds to the even one
// (1); 1 + 3 x 2^-8 lies between 1 + 2^-7 and 1 + 2^-6 and rounds to 1 + 2^-6; anything above the middle
// rounds up. Truncation would give 1, 1 + 2^-7, 1.
TEST_F(HfWeightsTest, Bf16IsRoundToNearestEven) {
    const std::vector<float> x = {1.f + 0x1p-8f, 1.f + 3 * 0x1p-8f, 1.f + 0x1p-8f + 0x1p-20f,
                                  -(1.f + 0x1p-8f + 0x1p-20f), 0x1.fffffep127f};
    const std::vector<float> want = {1.f, 1.f + 0x1p-6f, 1.f + 0x1p-7f, -(1.f + 0x1p-7f),
                                     std::numeric_limits<float>::infinity()};
    write_hf_weights(root_, {{"x", {5}, x.data()}}, opts(HfDType::kBF16));
    const HfWeights w = HfWeights::open(root_, /*verify=*/false);  // the last one overflows to infinity
    EXPECT_EQ(w.info("x").dtype, StDType::kBF16);
    std::vector<float> got(x.size());
    w.read_f32("x", got.data(), {5});
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(float_bits(got[i]), float_bits(want[i])) << i;
}

// Writes the reference file for tools/ref/hf_weights_ref.py: each tensor's fp32 values.
void write_reference(const fs::path& dir, const Model& m, const char* dtype) {
    json ref = {{"dtype", dtype}, {"tensors", json::object()}};
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const fs::path f = dir / ("ref_" + std::to_string(i) + ".f32");
        write_file_atomic(f,
                          std::string_view(reinterpret_cast<const char*>(m.values[i].data()), m.values[i].size() * 4));
        ref["tensors"][m.tensors[i].name] = {{"shape", m.tensors[i].shape}, {"f32_file", f.string()}};
    }
    write_file_atomic(dir / "ref.json", ref.dump());
}

int run_reference(const fs::path& out, const fs::path& ref) {
    const std::string cmd = "/usr/bin/python3 " LLMT_SOURCE_DIR "/tools/ref/hf_weights_ref.py " + out.string() + " " +
                            ref.string();
    return std::system(cmd.c_str());
}

TEST_F(HfWeightsTest, ShardsAboveTheLimitWithAnIndex) {
    const Model m = toy_model();
    // bf16: 256 + 128 + 256 + 256 + 16 + 256 bytes; a 600-byte limit gives [embed, q] [gate, down, norm] [lm_head].
    const fs::path out = root_ / "out";
    fs::create_directories(out);
    const auto files = write_hf_weights(out, m.tensors, opts(HfDType::kBF16, 600));
    EXPECT_EQ(files, (std::vector<std::string>{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                               "model-00003-of-00003.safetensors", "model.safetensors.index.json"}));
    const json index = json::parse(read_file(out / "model.safetensors.index.json"));
    EXPECT_EQ(index["metadata"]["total_size"], 1168);
    EXPECT_EQ(index["weight_map"]["model.norm.weight"], "model-00002-of-00003.safetensors");
    EXPECT_EQ(index["weight_map"]["lm_head.weight"], "model-00003-of-00003.safetensors");

    const HfWeights w = HfWeights::open(out);
    EXPECT_TRUE(w.sharded());
    EXPECT_EQ(w.shard_count(), 3u);
    EXPECT_EQ(w.file_of("lm_head.weight"), (out / "model-00003-of-00003.safetensors").string());
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        std::vector<float> got(m.values[i].size());
        w.read_f32(m.tensors[i].name, got.data(), m.tensors[i].shape);
        for (size_t k = 0; k < got.size(); ++k)
            ASSERT_EQ(float_bits(got[k]), float_bits(float_from_bf16(bf16_from_float(m.values[i][k]))))
                << m.tensors[i].name << "[" << k << "]";
    }
    write_reference(root_, m, "BF16");
    EXPECT_EQ(run_reference(out, root_ / "ref.json"), 0)
        << "tools/ref/hf_weights_ref.py refused the sharded bf16 export";

    // A tensor larger than the limit gets a shard of its own; fp32 sharded reads back bit for bit.
    const fs::path out32 = root_ / "out32";
    fs::create_directories(out32);
    EXPECT_EQ(write_hf_weights(out32, m.tensors, opts(HfDType::kF32, 100)).size(), 7u);
    write_reference(root_, m, "F32");
    EXPECT_EQ(run_reference(out32, root_ / "ref.json"), 0);
}

// A sharded directory made by hand: two shards and an index, then broken one way at a time.
class HfIndexTest : public HfWeightsTest {
protected:
    void SetUp() override {
        HfWeightsTest::SetUp();
        write_safetensors(root_ / "s1.safetensors",
                          {{"a", StDType::kF32, {2}, two_}, {"b", StDType::kF32, {2}, two_}});
        write_safetensors(root_ / "s2.safetensors", {{"c", StDType::kF32, {2}, two_}});
        index_ = {{"metadata", {{"total_size", 24}}},
                  {"weight_map", {{"a", "s1.safetensors"}, {"b", "s1.safetensors"}, {"c", "s2.safetensors"}}}};
    }
    std::string open_error() {
        write_file_atomic(root_ / "model.safetensors.index.json", index_.dump());
        return error_of(root_);
    }
    const float two_[2] = {1.f, 2.f};
    json index_;
};

TEST_F(HfIndexTest, OpensAndReads) {
    write_file_atomic(root_ / "model.safetensors.index.json", index_.dump());
    const HfWeights w = HfWeights::open(root_);
    EXPECT_EQ(w.names(), (std::vector<std::string>{"a", "b", "c"}));
    float c[2];
    w.read_f32("c", c, {2});
    EXPECT_EQ(c[1], 2.f);
    EXPECT_EQ(w.source(), root_ / "model.safetensors.index.json");
}

TEST_F(HfIndexTest, MissingShard) {
    index_["weight_map"]["c"] = "s3.safetensors";
    const std::string e = open_error();
    EXPECT_NE(e.find("model.safetensors.index.json: shard 's3.safetensors' is missing"), std::string::npos) << e;
}

TEST_F(HfIndexTest, TensorMissingFromItsShard) {
    index_["weight_map"]["d"] = "s2.safetensors";
    const std::string e = open_error();
    EXPECT_NE(e.find("tensor 'd' is listed in shard 's2.safetensors', which does not hold it"), std::string::npos)
        << e;
}

TEST_F(HfIndexTest, TensorInTwoShards) {
    write_safetensors(root_ / "s2.safetensors", {{"c", StDType::kF32, {2}, two_}, {"a", StDType::kF32, {2}, two_}});
    const std::string e = open_error();
    EXPECT_NE(e.find("tensor 'a' is in shard 's2.safetensors' and in shard 's1.safetensors'"), std::string::npos) << e;
}

TEST_F(HfIndexTest, TensorNamedTwiceInTheIndex) {
    write_file_atomic(root_ / "model.safetensors.index.json",
                      R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors", "a": "s2.safetensors"}})");
    const std::string e = error_of(root_);
    EXPECT_NE(e.find("model.safetensors.index.json"), std::string::npos) << e;
    EXPECT_NE(e.find("duplicate"), std::string::npos) << e;
}

TEST_F(HfIndexTest, UnlistedTensorInAShard) {
    index_["weight_map"].erase("b");
    const std::string e = open_error();
    EXPECT_NE(e.find("shard 's1.safetensors' holds tensor 'b', which the weight_map does not list"), std::string::npos)
        << e;
}

TEST_F(HfIndexTest, ShardOutsideTheDirectoryIsRefused) {
    index_["weight_map"]["c"] = "../s2.safetensors";
    const std::string e = open_error();
    EXPECT_NE(e.find("weight_map[\"c\"]: expected a .safetensors file name in the same directory"), std::string::npos)
        << e;
}

TEST_F(HfIndexTest, ChecksumMismatchNamesTheShard) {
    write_file_atomic(root_ / "model.safetensors.index.json", index_.dump());
    // Flip one byte of c's data (the last 8 bytes of s2): the CRC recorded at write time no longer matches.
    std::string bytes = read_file(root_ / "s2.safetensors");
    bytes[bytes.size() - 1] ^= 0x01;
    write_file_atomic(root_ / "s2.safetensors", bytes);
    const std::string e = error_of(root_);
    EXPECT_NE(e.find("s2.safetensors"), std::string::npos) << e;
    EXPECT_NE(e.find("'c'"), std::string::npos) << e;
}

TEST_F(HfWeightsTest, NoWeights) {
    EXPECT_NE(error_of(root_).find("has neither model.safetensors nor model.safetensors.index.json"),
              std::string::npos);
    EXPECT_NE(error_of(root_ / "x.safetensors").find("does not exist"), std::string::npos);
}

TEST_F(HfWeightsTest, WriterRefusesBadInput) {
    const float v[2] = {1, 2};
    EXPECT_THROW(write_hf_weights(root_, {}), InputError);
    EXPECT_THROW(write_hf_weights(root_, {{"a", {2}, v}, {"a", {2}, v}}), InputError);
    EXPECT_THROW(write_hf_weights(root_, {{"a", {2}, nullptr}}), InputError);
}

// ---- the export directory ----

TEST_F(HfWeightsTest, ExportDirIsAllOrNothing) {
    const fs::path target = root_ / "export";
    const float v[2] = {1, 2};
    {
        HfExportDir d(target);
        write_hf_weights(d.dir(), {{"a", {2}, v}});
        EXPECT_FALSE(fs::exists(target));  // nothing visible before commit
    }
    EXPECT_FALSE(fs::exists(target));  // abandoned: no target, no temp directory left behind
    EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 0);

    {
        HfExportDir d(target);
        write_hf_weights(d.dir(), {{"a", {2}, v}, {"b", {2}, v}}, opts(HfDType::kBF16, 4));  // two shards, an index
        write_file_atomic(d.dir() / "config.json", "{}");
        d.commit();
    }
    EXPECT_TRUE(fs::exists(target / "model.safetensors.index.json"));
    {
        // A previous export is replaced as a whole: its shards do not survive next to the new single file.
        HfExportDir d(target);
        write_hf_weights(d.dir(), {{"a", {2}, v}});
        d.commit();
    }
    EXPECT_TRUE(fs::exists(target / "model.safetensors"));
    EXPECT_FALSE(fs::exists(target / "model.safetensors.index.json"));
    EXPECT_FALSE(fs::exists(target / "model-00001-of-00002.safetensors"));
    EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1);

    // A directory with anything an export does not write is refused, naming it.
    write_file_atomic(target / "notes.txt", "mine");
    try {
        HfExportDir d(target);
        ADD_FAILURE() << "a directory with foreign files was accepted";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("holds 'notes.txt'"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(fs::exists(target / "notes.txt"));
    EXPECT_THROW(HfExportDir(root_ / "."), InputError);
    {
        HfExportDir d((root_ / "slash").string() + "/");  // a trailing slash names the same directory
        write_hf_weights(d.dir(), {{"a", {2}, v}});
        d.commit();
    }
    EXPECT_TRUE(fs::exists(root_ / "slash/model.safetensors"));
}

}  // namespace
}  // namespace llmt::models
