// Sharded fp32 masters on a GPU (label gpu; skipped without one): a bf16 store on CUDA keeping the masters
// of one chunk, AdamW on that chunk with ParamsAt::kSlice writing its part of the bf16 compute copy in the
// same kernel, against the same chunk of an unsharded bf16 store updated on the CPU. Covers the device
// side of ParamStore::shard_masters, write_f32 / sync_compute_params of a sharded store and the slice
// pointer of the CUDA optimizer kernel; the collectives around them need 2 GPUs (nccl_process_group_test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/bf16.h"
#include "kernels/ops.h"
#include "models/param_store.h"
#include "optim/adamw.h"
#include "train/dist_context.h"
#include "store_slots.h"

namespace llmt::train {
namespace {

using models::ParamInit;
using models::ParamKind;
using models::ParamSpec;
using models::ParamStore;

ParamStore make_store(Device device) {
    ParamStore s;
    s.add(ParamSpec::make("wte", {500, 24}, ParamInit::kNormal, ParamKind::kEmbedding));
    s.add(ParamSpec::make("w1", {37, 24}, ParamInit::kNormal, ParamKind::kWeight));
    s.add(ParamSpec::make("b1", {37}, ParamInit::kZeros, ParamKind::kBias));
    s.layout(device, DType::kBF16);
    s.allocate();
    s.init_random(99, 0.02, 0.01);
    return s;
}

using test::slots_of;

template <typename T>
std::vector<T> to_host(const void* p, size_t n, DType dt) {
    std::vector<T> h(n);
    kernels::copy(Tensor(h.data(), {static_cast<int64_t>(n)}, dt),
                  Tensor(const_cast<void*>(p), {static_cast<int64_t>(n)}, dt, Device::kCuda));
    return h;
}

TEST(ZeroMastersCuda, ShardedChunkOnTheGpuEqualsTheCpuUpdate) {
    if (kernels::device_count(Device::kCuda) == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    ParamStore gpu = make_store(Device::kCuda), cpu = make_store(Device::kCpu);
    const size_t numel = gpu.arena_numel();
    const optim::ArenaSlice mine = zero_shard(numel, 2, 1);
    const size_t n = mine.end - mine.begin;
    const std::vector<uint16_t> lp0 = to_host<uint16_t>(gpu.compute_params().data, numel, DType::kBF16);
    gpu.shard_masters(mine.begin, mine.end);
    EXPECT_EQ(gpu.param_bytes(), cpu.param_bytes() - cpu.arena_numel() * 4 + (n * 4 + 63) / 64 * 64);

    optim::AdamWConfig ac;
    optim::AdamW og(slots_of(gpu), numel, ac, mine, Device::kCuda), oc(slots_of(cpu), numel, ac, mine, Device::kCpu);
    std::vector<float> g(numel);
    for (int step = 0; step < 3; ++step) {
        for (size_t i = 0; i < numel; ++i)
            g[i] = 0.01f * std::sin(0.1f * static_cast<float>(i) + static_cast<float>(step));
        kernels::copy(Tensor(gpu.grads().data(), {static_cast<int64_t>(numel)}, DType::kF32, Device::kCuda),
                      Tensor(g.data(), {static_cast<int64_t>(numel)}));
        og.step(gpu.masters(), static_cast<const float*>(gpu.grads().data()), 1e-2f, 0.8f, gpu.compute_params(),
                optim::Optimizer::ParamsAt::kSlice);
        oc.step(cpu.masters(), g.data(), 1e-2f, 0.8f, cpu.compute_params());
    }
    const std::vector<float> m = to_host<float>(gpu.masters(), n, DType::kF32);
    const std::vector<uint16_t> lp = to_host<uint16_t>(gpu.compute_params().data, numel, DType::kBF16);
    const float* want = cpu.masters();
    // The CUDA and CPU AdamW differ in the rounding of sqrt and division: a few ulp after 3 steps.
    for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(m[i], want[mine.begin + i], 1e-6f + 1e-5f * std::abs(want[mine.begin + i])) << "master " << i;
    for (size_t i = 0; i < numel; ++i) {
        if (i >= mine.begin && i < mine.end)
            EXPECT_EQ(lp[i], bf16_from_float(m[i - mine.begin])) << "copy " << i << " does not follow its master";
        else
            EXPECT_EQ(lp[i], lp0[i]) << "copy " << i << " outside the chunk was written";
    }
    // Writing a tensor into the sharded store: the copy whole, the masters' part in the chunk.
    std::vector<float> w(500 * 24);
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.001f * static_cast<float>(i % 977);
    gpu.write_f32(0, w.data());
    const std::vector<uint16_t> lp2 = to_host<uint16_t>(gpu.compute_params().data, w.size(), DType::kBF16);
    for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(lp2[i], bf16_from_float(w[i])) << i;
    const std::vector<float> m2 = to_host<float>(gpu.masters(), n, DType::kF32);
    for (size_t i = mine.begin; i < std::min(mine.end, w.size()); ++i) ASSERT_EQ(m2[i - mine.begin], w[i]) << i;
}

}  // namespace
}  // namespace llmt::train
