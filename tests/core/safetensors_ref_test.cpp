// Interop: a safetensors file written by another implementation (tools/ref/safetensors_ref.py, PyTorch
// tensors laid out by the format spec) loads in our reader, and our BF16/F16/F64 -> F32 conversion
// equals PyTorch's bit for bit (including subnormals, infinities and signed zero).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "core/safetensors.h"

namespace fs = std::filesystem;
using namespace llmt;

TEST(SafetensorsReference, LoadsFileWrittenByPyTorchScript) {
    fs::path out = fs::temp_directory_path() / ("llmt_st_ref_" + std::to_string(::getpid()) + ".safetensors");
    std::string cmd = "/usr/bin/python3 " LLMT_SOURCE_DIR "/tools/ref/safetensors_ref.py " + out.string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << " failed (is python3-torch installed? scripts/setup.sh)";
    auto f = SafetensorsFile::open(out);
    EXPECT_EQ(f.metadata().at("format"), "pt");
    EXPECT_EQ(f.info("transformer.wte.weight").shape, (Shape{17, 8}));
    EXPECT_EQ(f.info("scalar").shape, Shape{});
    EXPECT_EQ(f.info("empty").shape, (Shape{0, 4}));
    float s = 0;
    f.read_f32("scalar", &s, {});
    EXPECT_EQ(s, 3.25f);
    std::vector<std::int64_t> ids(11);
    f.read_exact("ids", StDType::kI64, {11}, ids.data());
    for (int i = 0; i < 11; ++i) EXPECT_EQ(ids[i], i - 5);
    std::vector<std::uint8_t> mask(3);
    f.read_exact("mask", StDType::kU8, {3}, mask.data());
    EXPECT_EQ(mask, (std::vector<std::uint8_t>{1, 0, 255}));

    for (const char* dt : {"bf16", "f16", "f64"}) {
        std::string name = std::string("x_") + dt;
        const Shape shape = f.info(name).shape;
        ASSERT_EQ(shape, Shape{512});
        std::vector<float> ours(512), theirs(512);
        f.read_f32(name, ours.data(), shape);
        f.read_f32(name + "_as_f32", theirs.data(), shape);
        // Bitwise: both sides do an exact widening (or round-to-nearest for F64), so no tolerance.
        EXPECT_EQ(std::memcmp(ours.data(), theirs.data(), 512 * sizeof(float)), 0) << name;
        for (int i = 0; i < 512; ++i) {
            if (std::memcmp(&ours[i], &theirs[i], 4) != 0) {
                ADD_FAILURE() << name << "[" << i << "]: ours " << ours[i] << " torch " << theirs[i];
                break;
            }
        }
    }
    fs::remove(out);
}
