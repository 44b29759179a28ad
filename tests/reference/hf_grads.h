// Our gradients in Hugging Face layout (models/hf_adapter.h hf_tensors of the gradient arena) against a
// reference safetensors file of the same names: every tensor present with the same shape, and its relative
// L2 error ||ours - ref|| / ||ref|| under `tol`. Shared by the GPT-2 and LLaMA reference tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/safetensors.h"

namespace llmt::testing {

inline void expect_grads_match(const std::vector<TensorRef>& ours, const SafetensorsFile& ref, double tol) {
    ASSERT_EQ(ours.size(), ref.size());
    for (const auto& t : ours) {
        SCOPED_TRACE(t.name);
        const auto& info = ref.info(t.name);
        ASSERT_EQ(info.shape, t.shape);
        std::vector<float> want(static_cast<size_t>(info.numel));
        ref.read_f32(t.name, want.data(), info.shape);
        const float* got = static_cast<const float*>(t.data);
        double num = 0, den = 0;
        for (size_t i = 0; i < want.size(); ++i) {
            num += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
            den += static_cast<double>(want[i]) * want[i];
        }
        EXPECT_LT(std::sqrt(num / std::max(den, 1e-30)), tol);
    }
}

}  // namespace llmt::testing
