// ZeRO-1 with sharded fp32 masters (ParamStore::shard_masters, DistContext::gather_masters) on real Gloo
// processes: a bf16 store (the compute copy whole, the masters of one shard), gradients reduce-scattered
// into the shard, AdamW on the shard writing its slice of the compute copy, the copy all-gathered. The
// model is a quadratic pull of the bf16 weights towards per-rank targets, so the 1-process run of both
// ranks' targets is the same optimisation: its losses must equal the 2-rank run's step by step, and
// checkpoints (the masters gathered whole, the optimizer state per rank) resume across 2 <-> 1 ranks.
// The memory test reads the allocator (mallinfo2), not timings.
#include <gtest/gtest.h>
#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/bf16.h"
#include "core/safetensors.h"
#include "distributed/multiproc.h"
#include "kernels/ops.h"
#include "models/param_store.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "support/compare.h"
#include "support/free_port.h"
#include "train/dist_context.h"
#include "store_slots.h"

namespace llmt::train {
namespace {

using models::ParamInit;
using models::ParamKind;
using models::ParamSpec;
using models::ParamStore;

constexpr int kSteps = 6, kResumeAt = 3;

// Odd sizes, so the arena has alignment gaps and the 2-rank split falls inside a tensor.
ParamStore make_store(int64_t scale = 1) {
    ParamStore s;
    s.add(ParamSpec::make("wte", {50 * scale, 24}, ParamInit::kNormal, ParamKind::kEmbedding));
    s.add(ParamSpec::make("w1", {37, 24}, ParamInit::kNormal, ParamKind::kWeight));
    s.add(ParamSpec::make("b1", {37}, ParamInit::kZeros, ParamKind::kBias));
    s.add(ParamSpec::make("ln", {24}, ParamInit::kOnes, ParamKind::kNorm));
    s.layout(Device::kCpu, DType::kBF16);
    s.allocate();
    return s;
}

using test::slots_of;

float target(int rank, size_t i) { return 0.05f * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(rank)); }

// Rank `rank`'s loss (mean squared distance of the bf16 weights from its targets) and its gradient, added
// into the store's gradient arena with weight `w`.
double loss_and_grad(ParamStore& s, int rank, float w) {
    const auto* lp = static_cast<const uint16_t*>(s.compute_params().data);
    auto* g = static_cast<float*>(s.grads().data());
    size_t n = 0;
    for (size_t t = 0; t < s.specs().size(); ++t) n += static_cast<size_t>(s.grad(t).numel());
    double loss = 0;
    for (size_t t = 0; t < s.specs().size(); ++t) {
        const size_t first = s.params().entry(t).offset / sizeof(float);
        for (size_t i = first; i < first + static_cast<size_t>(s.grad(t).numel()); ++i) {
            const float d = float_from_bf16(lp[i]) - target(rank, i);
            loss += static_cast<double>(d) * d / static_cast<double>(n);
            g[i] += w * 2.0f * d / static_cast<float>(n);
        }
    }
    return loss;
}

std::string ckpt_model(const std::filesystem::path& dir) { return (dir / "model.safetensors").string(); }
std::string ckpt_opt(const std::filesystem::path& dir, int rank) {
    return (dir / ("optimizer.rank" + std::to_string(rank) + ".safetensors")).string();
}

// Steps [from, kSteps) of one rank of `world` (world 1: a single process computing both ranks' losses).
// from > 0 resumes from `in` (written by a run of any world size); `out`, when set, gets the checkpoint
// after kResumeAt steps. Returns the losses, mean over ranks, one per step.
std::vector<double> train_steps(int world, int rank, int from, const std::filesystem::path& in,
                                const std::filesystem::path& out) {
    config::Config cfg;
    cfg.dist.backend = "gloo";
    cfg.dist.timeout_sec = 60;
    DistContext dc = world > 1 ? DistContext::create(cfg, Device::kCpu) : DistContext::single();
    ParamStore s = make_store();
    s.init_random(1234, 0.02, 0.01);
    const size_t numel = s.arena_numel();
    const optim::ArenaSlice mine = zero_shard(numel, world, rank);
    if (world > 1) s.shard_masters(mine.begin, mine.end);  // as the trainer does before the optimizer exists
    optim::AdamWConfig ac;
    ac.weight_decay = 0.1f;
    optim::AdamW opt(slots_of(s), numel, ac, mine);
    if (from > 0) {
        const SafetensorsFile model = SafetensorsFile::open(ckpt_model(in));
        for (size_t t = 0; t < s.specs().size(); ++t) {
            std::vector<float> host(static_cast<size_t>(s.grad(t).numel()));
            model.read_f32(s.spec(t).name, host.data(), Shape(s.spec(t).shape.begin(), s.spec(t).shape.end()));
            s.write_f32(t, host.data());
        }
        s.sync_compute_params();
        std::vector<SafetensorsFile> files;
        for (int q = 0; std::filesystem::exists(ckpt_opt(in, q)); ++q)
            files.push_back(SafetensorsFile::open(ckpt_opt(in, q)));
        std::vector<const SafetensorsFile*> ptrs;
        for (const auto& f : files) ptrs.push_back(&f);
        opt.load_state_shards(ptrs);
    }
    std::vector<double> losses;
    for (int step = from; step < kSteps; ++step) {
        s.grads().zero();
        double loss = 0;
        if (world == 1) {
            for (int r = 0; r < 2; ++r) loss += loss_and_grad(s, r, 0.5f) / 2;
        } else {
            loss = dc.mean(loss_and_grad(s, rank, 1.0f));
        }
        losses.push_back(loss);
        const double norm =
            optim::global_norm_from_sumsq(dc.zero_reduce_grads(static_cast<float*>(s.grads().data()), numel));
        const float coef = optim::clip_coefficient(norm, 0.05);  // clipping active in some steps
        opt.step(s.masters(), static_cast<const float*>(s.grads().data()), 1e-2f, coef, s.compute_params(),
                 s.masters_sharded() ? optim::Optimizer::ParamsAt::kSlice : optim::Optimizer::ParamsAt::kArena);
        dc.zero_gather_params(s.masters(), numel, s.compute_params());
        if (step + 1 == kResumeAt && !out.empty()) {
            const Arena whole = dc.gather_masters(s);
            if (rank == 0) {
                std::vector<TensorRef> refs;
                for (size_t t = 0; t < s.specs().size(); ++t)
                    refs.push_back({s.spec(t).name, StDType::kF32,
                                    Shape(s.spec(t).shape.begin(), s.spec(t).shape.end()), whole.view(t).data});
                write_safetensors(ckpt_model(out), refs, {});
            }
            write_safetensors(ckpt_opt(out, rank), opt.state_tensors(), opt.state_metadata());
            dc.barrier();
        }
    }
    return losses;
}

std::string encode(const std::vector<double>& v) {
    std::ostringstream o;
    o.precision(17);
    for (double x : v) o << x << ' ';
    return o.str();
}
std::vector<double> decode(const std::string& s) {
    std::istringstream i(s);
    std::vector<double> v;
    for (double x; i >> x;) v.push_back(x);
    return v;
}

// Runs train_steps on `world` forked ranks (world 1: one child without the worker variables, so the
// gtest process never runs OpenMP before it forks). Returns rank 0's losses.
std::vector<double> run_world(int world, int from, const std::filesystem::path& in, const std::filesystem::path& out) {
    const int port = llmt::testing::free_port();
    std::vector<llmt::testing::ChildFn> fns;
    for (int r = 0; r < world; ++r)
        fns.push_back([=](const std::function<void(const std::string&)>& report) {
            if (world > 1) {
                setenv("RANK", std::to_string(r).c_str(), 1);
                setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
                setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
                setenv("LOCAL_WORLD_SIZE", std::to_string(world).c_str(), 1);
                setenv("MASTER_ADDR", "127.0.0.1", 1);
                setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
            }
            report(encode(train_steps(world, r, from, in, out)));
        });
    const auto rs = llmt::testing::run_children(fns, 120);
    for (const auto& r : rs) EXPECT_TRUE(r.ok) << llmt::testing::describe(rs);
    return rs.empty() ? std::vector<double>() : decode(rs[0].message);
}

// The run's losses are means of f32 sums over ranks (one f32 all-reduce) against a double sum: 1e-5
// relative, as the trainer's 2-rank test; the weights behind them went through the same bf16 roundings.
void expect_losses_equal(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
    ASSERT_TRUE(support::comparable(got, want)) << what;
    for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-5 * std::abs(want[i])) << what << ", step " << i + 1;
}

TEST(ZeroMasters, TwoRanksEqualOneProcessAndCheckpointsReshard) {
    const auto root = std::filesystem::temp_directory_path() / ("llmt_zero_masters_" + std::to_string(::getpid()));
    std::filesystem::remove_all(root);
    const auto ck1 = root / "one", ck2 = root / "two";
    std::filesystem::create_directories(ck1);
    std::filesystem::create_directories(ck2);
    const std::vector<double> one = run_world(1, 0, {}, ck1);
    ASSERT_EQ(one.size(), static_cast<size_t>(kSteps));
    EXPECT_LT(one.back(), one.front());  // it trains
    const std::vector<double> two = run_world(2, 0, {}, ck2);
    expect_losses_equal(two, one, "2 ranks, sharded masters");
    const std::vector<double> tail(one.begin() + kResumeAt, one.end());
    // The 2-rank checkpoint (masters gathered whole, two optimizer shards) continues in 1 process, and the
    // 1-process one on 2 ranks with sharded masters, both as the uninterrupted run.
    expect_losses_equal(run_world(1, kResumeAt, ck2, {}), tail, "2 ranks -> 1 process");
    expect_losses_equal(run_world(2, kResumeAt, ck1, {}), tail, "1 process -> 2 ranks");
    std::filesystem::remove_all(root);
}

// Bytes the allocator hands out (small blocks and mmapped ones).
size_t allocated_bytes() {
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

size_t round64(size_t bytes) { return (bytes + 63) / 64 * 64; }

TEST(ZeroMasters, RankMemoryOfMastersAndOptimizerHalvesAtTwoRanks) {
    // A store of ~1.3M parameters: 5.3 MB of masters, 10.6 MB of AdamW moments, far above page rounding.
    const size_t base = allocated_bytes();
    ParamStore whole = make_store(1000);
    const size_t numel = whole.arena_numel();
    EXPECT_GT(allocated_bytes() - base, numel * (4 + 2 + 4)) << "masters, bf16 copy and gradients allocated";
    optim::AdamW opt_whole(slots_of(whole), numel, optim::AdamWConfig{});
    const size_t unsharded = allocated_bytes() - base;

    // Rank 1 of 2 (the larger shard when the world does not divide the arena).
    const size_t mid = allocated_bytes();
    ParamStore half = make_store(1000);
    const optim::ArenaSlice r1 = zero_shard(numel, 2, 1);
    half.shard_masters(r1.begin, r1.end);
    optim::AdamW opt_half(slots_of(half), numel, optim::AdamWConfig{}, r1);
    const size_t sharded = allocated_bytes() - mid;
    const size_t shard = r1.end - r1.begin;

    // Half of (masters + optimizer state) is gone at 2 ranks: 4 bytes of master and 8 of moments per
    // element; 64 KiB for the allocator's page rounding.
    const size_t master_and_opt = 12 * numel;
    std::printf(
        "[zero-masters] %zu parameters: unsharded %.2f MB (masters, bf16 copy, gradients, moments), rank 1 of 2 "
        "%.2f MB, fell %.2f MB = %.3f of masters + moments (%.2f MB)\n",
        numel, unsharded / 1e6, sharded / 1e6, (static_cast<double>(unsharded) - static_cast<double>(sharded)) / 1e6,
        (static_cast<double>(unsharded) - static_cast<double>(sharded)) / static_cast<double>(master_and_opt),
        master_and_opt / 1e6);
    EXPECT_GE(unsharded - sharded + 65536, master_and_opt / 2)
        << "unsharded " << unsharded << " B, sharded " << sharded << " B, masters + moments " << master_and_opt
        << " B";
    // The store's figure (what the memory plan counts) is its arenas: the bf16 copy whole, the masters' shard.
    EXPECT_EQ(half.param_bytes(), round64(2 * numel) + round64(4 * shard));
    EXPECT_EQ(whole.param_bytes(), round64(2 * numel) + 4 * numel);
    // And it is what the allocator gave (with the gradients and the shard's moments), within 1%.
    const double reported = static_cast<double>(half.param_bytes() + half.grad_bytes() + 8 * shard);
    EXPECT_NEAR(static_cast<double>(sharded), reported, 0.01 * reported);
}

}  // namespace
}  // namespace llmt::train
