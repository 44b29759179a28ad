// The kernel case table's CUDA side (case_table.h): every kCuda row runs the CUDA fp32 op against the CPU fp32 op,
// every kBf16 row the CUDA bf16 op against the CPU fp32 op on the same bf16-rounded inputs, on fresh random inputs
// (seed printed; replay with LLMT_TEST_SEED). Device tensors live in an Arena on Device::kCuda (the allocator hook,
// copies and the NaN poisoning of outputs go through it). Label `gpu`: each test skips itself, saying so, where no
// CUDA device exists (or the build has no CUDA). `cuda_case_table_test --perf` times every CUDA row instead. Beside
// the table: the device arena and the dtype conversion, which are no op of a row.
#include <gtest/gtest.h>

#include <vector>

#include "core/arena.h"
#include "core/bf16.h"
#include "kernels/case_runner.h"
#include "kernels/ops.h"
#include "kernels/test_util.h"

namespace llmt::kernels::cases {
namespace {

class OnCuda : public ::testing::TestWithParam<size_t> {
protected:
    void SetUp() override {
        if (device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    }
};

class CudaVsCpu : public OnCuda {};
class Bf16VsCpu : public OnCuda {};

TEST_P(CudaVsCpu, Matches) {
    check_row(GetParam(), kCuda);
}
TEST_P(Bf16VsCpu, Matches) {
    check_row(GetParam(), kBf16);
}

auto name = [](const ::testing::TestParamInfo<size_t>& p) { return test_name(p.param); };
INSTANTIATE_TEST_SUITE_P(CaseTable, CudaVsCpu, ::testing::ValuesIn(rows_of(kCuda)), name);
INSTANTIATE_TEST_SUITE_P(CaseTable, Bf16VsCpu, ::testing::ValuesIn(rows_of(kBf16)), name);

class CudaDevice : public ::testing::Test {
protected:
    void SetUp() override {
        if (device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    }
};

TEST_F(CudaDevice, ArenaZeroCopyRoundTrip) {
    Arena a;
    a.add("x", {3, 5});
    a.add("y", {7});
    a.allocate(true, Device::kCuda);
    EXPECT_EQ(a.device(), Device::kCuda);
    EXPECT_EQ(a.view("x").device, Device::kCuda);
    std::vector<float> back(15, 1.0f);
    copy(Tensor(back.data(), {3, 5}), a.view("x"));
    for (float v : back) EXPECT_EQ(v, 0.0f);
    auto x = test::randn(15, base_seed("") + 1);
    copy(a.view("x"), Tensor(x.data(), {3, 5}));
    Arena m = a.mirror();  // same layout, zeroed, on the device
    EXPECT_EQ(m.device(), Device::kCuda);
    copy(m.view("x"), a.view("x"));  // device to device
    copy(Tensor(back.data(), {3, 5}), m.view("x"));
    EXPECT_EQ(back, x);
    zero(m.view("x"));
    copy(Tensor(back.data(), {3, 5}), m.view("x"));
    for (float v : back) EXPECT_EQ(v, 0.0f);
}

// fp32 -> bf16 -> fp32 on the device rounds to nearest even exactly like the host helper; bf16 ops refuse CPU tensors.
TEST_F(CudaDevice, ConvertRoundTripAndCpuRefusal) {
    auto x = test::randn(1000, base_seed("") + 2, 3.0f);
    Arena a;
    a.add("f", {1000});
    a.add("b", {1000}, DType::kBF16);
    a.add("g", {1000});
    a.allocate(false, Device::kCuda);
    copy(a.view("f"), Tensor(x.data(), {1000}));
    convert(a.view("b"), a.view("f"));
    convert(a.view("g"), a.view("b"));
    std::vector<float> back(1000);
    copy(Tensor(back.data(), {1000}), a.view("g"));
    for (auto& v : x) v = float_from_bf16(bf16_from_float(v));
    EXPECT_EQ(back, x);
    std::vector<uint16_t> h(4);
    EXPECT_THROW(gelu_forward(Tensor(h.data(), {4}, DType::kBF16), Tensor(h.data(), {4}, DType::kBF16)),
                 InternalError);
}

}  // namespace
}  // namespace llmt::kernels::cases

int main(int argc, char** argv) {
    using namespace llmt::kernels::cases;
    return case_table_main(argc, argv, kCuda | kBf16);
}
