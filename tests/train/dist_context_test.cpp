// ZeRO-1's collectives of DistContext (train/dist_context.h) on 2 and 3 real processes over Gloo, on an
// arena whose size the world does not divide (so the remainder on the last rank is exercised):
// zero_reduce_grads leaves the mean gradient in each rank's zero_shard and returns the global sum of
// squares; zero_gather_params gathers the fp32 weights, or the bf16 compute copy alone.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/bf16.h"
#include "distributed/multiproc.h"
#include "support/free_port.h"
#include "train/dist_context.h"

namespace llmt::train {
namespace {

// Integer-valued, so sums and means over ranks are exact in f32 (the checks compare with ==).
float grad_value(int rank, size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 101)); }
float weight_value(size_t i) { return static_cast<float>(static_cast<int>(i % 37) - 18); }

class ZeroCollectives : public ::testing::TestWithParam<int> {};

TEST_P(ZeroCollectives, ReduceIntoTheShardAndGatherTheWhole) {
    const int world = GetParam();
    const size_t numel = 1000 * static_cast<size_t>(world) + static_cast<size_t>(world) - 1;  // remainder world-1
    const int port = llmt::testing::free_port();
    std::vector<llmt::testing::ChildFn> fns;
    for (int r = 0; r < world; ++r) {
        fns.push_back([=](const std::function<void(const std::string&)>&) {
            setenv("RANK", std::to_string(r).c_str(), 1);
            setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
            setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
            setenv("LOCAL_WORLD_SIZE", std::to_string(world).c_str(), 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
            config::Config cfg;
            cfg.dist.backend = "gloo";
            cfg.dist.timeout_sec = 60;
            DistContext dc = DistContext::create(cfg, Device::kCpu);
            const optim::ArenaSlice mine = zero_shard(numel, world, r);

            // Gradients: each rank's own values; afterwards its slice holds the mean over ranks.
            std::vector<float> g(numel);
            for (size_t i = 0; i < numel; ++i) g[i] = grad_value(r, i);
            const double sumsq = dc.zero_reduce_grads(g.data(), numel);
            double want_sumsq = 0;
            for (size_t i = 0; i < numel; ++i) {
                float s = 0;
                for (int q = 0; q < world; ++q) s += grad_value(q, i);
                const float mean = s / static_cast<float>(world);
                want_sumsq += static_cast<double>(mean) * mean;
                if (i >= mine.begin && i < mine.end && g[i] != mean)
                    throw std::runtime_error("rank " + std::to_string(r) + ": gradient " + std::to_string(i) + " is " +
                                             std::to_string(g[i]) + ", expected the mean " + std::to_string(mean));
            }
            // The sum of squares goes through one f32 all-reduce: ~1e-7 relative.
            if (std::abs(sumsq - want_sumsq) > 1e-6 * want_sumsq)
                throw std::runtime_error("sum of squares " + std::to_string(sumsq) + ", expected " +
                                         std::to_string(want_sumsq));

            // fp32 weights: every rank holds only its slice right; afterwards all hold the whole.
            std::vector<float> w(numel, -1.0f);
            for (size_t i = mine.begin; i < mine.end; ++i) w[i] = weight_value(i);
            dc.zero_gather_params(w.data(), numel);
            for (size_t i = 0; i < numel; ++i)
                if (w[i] != weight_value(i))
                    throw std::runtime_error("fp32 weight " + std::to_string(i) + " is " + std::to_string(w[i]));

            // The bf16 compute copy alone: gathered whole; the fp32 weights are left as they were.
            std::vector<uint16_t> lp(numel, 0);
            std::vector<float> w2(numel, -1.0f);
            for (size_t i = mine.begin; i < mine.end; ++i) lp[i] = bf16_from_float(weight_value(i));
            dc.zero_gather_params(w2.data(), numel, Tensor(lp.data(), {static_cast<int64_t>(numel)}, DType::kBF16));
            for (size_t i = 0; i < numel; ++i) {
                if (float_from_bf16(lp[i]) != weight_value(i))
                    throw std::runtime_error("bf16 weight " + std::to_string(i) + " is " +
                                             std::to_string(float_from_bf16(lp[i])));
                if (w2[i] != -1.0f) throw std::runtime_error("the fp32 weights were written by a bf16 gather");
            }
            dc.barrier();
        });
    }
    const auto rs = llmt::testing::run_children(fns, 120);
    for (const auto& r : rs) EXPECT_TRUE(r.ok) << llmt::testing::describe(rs);
}

INSTANTIATE_TEST_SUITE_P(Worlds, ZeroCollectives, ::testing::Values(2, 3),
                         [](const auto& tp) { return "world" + std::to_string(tp.param); });

}  // namespace
}  // namespace llmt::train
