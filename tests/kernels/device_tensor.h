// One device tensor (f32, bf16 or i32) in its own Arena on the GPU, for the CUDA kernel tests: poisoned
// until written (NaN, or -7 for i32, a value no kernel writes), with values in and out as floats
// (device_floats.h: bf16 rounded to nearest even) or as int32. Every transfer goes through kernels::copy on
// the ops' stream and waits for it, so it is ordered with the kernels the test launches on that stream.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "kernels/device_floats.h"
#include "kernels/ops.h"

namespace llmt::kernels::test {

class DeviceTensor {
public:
    DeviceTensor(std::vector<int64_t> shape, DType dt) : dt_(dt) {
        arena_.add("t", std::move(shape), dt);
        arena_.allocate(false, Device::kCuda);
        poison();
    }
    Tensor t() const { return arena_.view(0); }
    size_t numel() const { return static_cast<size_t>(t().numel()); }

    void upload(const std::vector<float>& v) {
        EXPECT_EQ(v.size(), numel());
        upload_floats(t(), v);
    }
    void upload_ids(const std::vector<int32_t>& v) {
        EXPECT_EQ(v.size(), numel());
        copy(t(), Tensor(const_cast<int32_t*>(v.data()), {t().numel()}, DType::kI32));
    }
    std::vector<float> download() const { return download_floats(t()); }
    std::vector<int32_t> download_ids() const {
        std::vector<int32_t> v(numel());
        copy(Tensor(v.data(), {t().numel()}, DType::kI32), t());
        return v;
    }
    void poison() {
        if (dt_ == DType::kI32) return upload_ids(std::vector<int32_t>(numel(), -7));
        upload(std::vector<float>(numel(), std::numeric_limits<float>::quiet_NaN()));
    }

private:
    DType dt_;
    Arena arena_;
};

}  // namespace llmt::kernels::test
