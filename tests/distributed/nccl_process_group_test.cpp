// NcclProcessGroup and the device Reducer with real processes, one per GPU (label gpu): collectives vs
// sums computed on the host, the Reducer's buckets (sizes, overlap on/off, no_sync) vs the exact mean,
// and a peer killed with SIGKILL turning into DistTimeout on the survivor within the timeout. Needs 2
// GPUs (more are used where a test says so); with fewer, each test prints why it skipped. The gtest
// process itself never touches CUDA (a forked child of a CUDA process cannot use CUDA): the GPU count is
// asked of a child.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "core/arena.h"
#include "distributed/process_group.h"
#include "distributed/reducer.h"
#include "distributed/tcp_store.h"
#include "kernels/ops.h"
#include "multiproc.h"

namespace llmt::dist {
namespace {

using namespace std::chrono_literals;
using testing::ChildFn;
using testing::describe;
using testing::run_children;
using Report = std::function<void(const std::string&)>;

int visible_gpus() {
    static const int n = [] {
        if (!nccl_available()) return 0;
        auto r = run_children({[](const Report& report) {
                                  report(std::to_string(kernels::device_count(Device::kCuda)));
                              }},
                              60);
        return r[0].ok ? std::stoi(r[0].message) : 0;
    }();
    return n;
}

#define REQUIRE_GPUS(n)                                                                                      \
    do {                                                                                                     \
        if (!nccl_available()) {                                                                             \
            std::printf("SKIPPED: this build has no CUDA/NCCL (LLMTRAIN_CUDA=OFF)\n");                       \
            GTEST_SKIP() << "built without CUDA";                                                            \
        }                                                                                                    \
        if (visible_gpus() < (n)) {                                                                          \
            std::printf("SKIPPED: needs %d GPUs, this machine shows %d\n", (n), visible_gpus());             \
            GTEST_SKIP() << "needs " << (n) << " GPUs, found " << visible_gpus();                            \
        }                                                                                                    \
    } while (0)

// One device buffer (an Arena of one view) with host<->device copies.
struct DeviceBuf {
    Arena arena;
    DeviceBuf(int64_t n, DType dt = DType::kF32) {
        arena.add("x", {n}, dt);
        arena.allocate(true, Device::kCuda);
    }
    Tensor t() const { return arena.view(0); }
    template <typename T>
    void put(const std::vector<T>& v) {
        kernels::copy(t(), Tensor(const_cast<T*>(v.data()), {static_cast<int64_t>(v.size())}, t().dtype));
    }
    template <typename T>
    std::vector<T> get() const {
        std::vector<T> v(static_cast<size_t>(t().numel()));
        kernels::copy(Tensor(v.data(), {static_cast<int64_t>(v.size())}, t().dtype), t());
        return v;
    }
};

// Runs fn(pg, report) on `world` ranks, rank r on GPU r, connected through a TCP store on 127.0.0.1.
std::vector<testing::ChildResult> run_ranks(int world, std::chrono::milliseconds timeout,
                                            const std::function<void(ProcessGroup&, const Report&)>& fn,
                                            double deadline_s = 240) {
    const int port = testing::free_port();
    std::vector<ChildFn> fns;
    for (int r = 0; r < world; ++r) {
        fns.push_back([=](const Report& report) {
            use_gpu_of_local_rank(r);
            auto store = make_tcp_store("127.0.0.1", port, r == 0, world, 60s);
            rendezvous(*store, r, world, 60s);
            auto pg = make_process_group("nccl", *store, r, world, timeout);
            fn(*pg, report);
        });
    }
    return run_children(fns, deadline_s);
}

void expect_all_ok(const std::vector<testing::ChildResult>& rs) {
    for (const auto& r : rs) ASSERT_TRUE(r.ok) << describe(rs);
}

// Pseudo-random values per (rank, salt), never zero: small multiples of 1/8 in [-4, 4] \ {0}, so sums of
// a few of them are exact in f32 and bf16 (bf16 has 8 significant bits: |x| <= 4 in steps of 1/8 needs 6).
std::vector<float> values_of(int rank, int salt, size_t n) {
    std::mt19937 gen(static_cast<uint32_t>(7919 * rank + salt));
    std::vector<float> v(n);
    for (auto& x : v) {
        int k = static_cast<int>(gen() % 64) - 32;
        x = static_cast<float>(k == 0 ? 1 : k) / 8.f;
    }
    return v;
}

uint16_t to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>(u >> 16);  // exact: the test's values have at most 8 significant bits
}
float from_bf16(uint16_t h) {
    uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

TEST(NcclProcessGroup, CollectivesMatchHostSums) {
    REQUIRE_GPUS(2);
    const int world = std::min(visible_gpus(), 4);
    auto rs = run_ranks(world, 60s, [world](ProcessGroup& pg, const Report& report) {
        const int rank = pg.rank();
        LLMT_CHECK(pg.backend() == "nccl" && pg.size() == world, "group {} of size {}", pg.backend(), pg.size());
        const size_t n = 1'000'003;  // odd: no chunk of any algorithm divides it evenly
        auto expect_sum = [&](int salt, size_t count) {
            std::vector<double> s(count, 0.0);
            for (int r = 0; r < world; ++r) {
                auto v = values_of(r, salt, count);
                for (size_t i = 0; i < count; ++i) s[i] += v[i];
            }
            return s;
        };
        // Sum of f32: the values are multiples of 1/8 below 2^10, so every partial sum is exact and the
        // result must equal the host's sum exactly.
        {
            DeviceBuf b(static_cast<int64_t>(n));
            b.put(values_of(rank, 1, n));
            pg.allreduce(b.t(), ReduceOp::kSum);
            auto got = b.get<float>();
            auto want = expect_sum(1, n);
            for (size_t i = 0; i < n; ++i)
                LLMT_CHECK(got[i] == static_cast<float>(want[i]), "allreduce sum [{}]: {} != {}", i, got[i], want[i]);
            report("sum ");
        }
        // Average (ncclAvg, which pre-multiplies each input by 1/world): exact for world 2 and 4 (powers of
        // two); any other world rounds each of its few terms once, far inside 1e-6 (the inputs are multiples of
        // 1/8 of magnitude >= 1/8, so 1e-6 absolute also covers sums that cancel to 0).
        {
            DeviceBuf b(static_cast<int64_t>(n));
            b.put(values_of(rank, 2, n));
            pg.allreduce(b.t(), ReduceOp::kAvg);
            auto got = b.get<float>();
            auto want = expect_sum(2, n);
            for (size_t i = 0; i < n; ++i) {
                const double w = want[i] / world;
                LLMT_CHECK(std::abs(got[i] - w) <= 1e-6 * std::abs(w) + 1e-6, "allreduce avg [{}]: {} != {}", i,
                           got[i], w);
            }
            report("avg ");
        }
        // i32 sum and bf16 sum (exact: see values_of).
        {
            std::vector<int32_t> v(4097);
            for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i) * (rank + 1) - 5 * rank;
            DeviceBuf b(static_cast<int64_t>(v.size()), DType::kI32);
            b.put(v);
            pg.allreduce(b.t(), ReduceOp::kSum);
            auto got = b.get<int32_t>();
            const int32_t ranks_sum = world * (world + 1) / 2, fives = 5 * world * (world - 1) / 2;
            for (size_t i = 0; i < v.size(); ++i)
                LLMT_CHECK(got[i] == static_cast<int32_t>(i) * ranks_sum - fives, "allreduce i32 [{}]: {}", i, got[i]);
            auto f = values_of(rank, 3, 10'001);
            std::vector<uint16_t> h(f.size());
            for (size_t i = 0; i < f.size(); ++i) h[i] = to_bf16(f[i]);
            DeviceBuf c(static_cast<int64_t>(h.size()), DType::kBF16);
            c.put(h);
            pg.allreduce(c.t(), ReduceOp::kSum);
            auto gh = c.get<uint16_t>();
            auto want = expect_sum(3, h.size());
            for (size_t i = 0; i < h.size(); ++i)
                LLMT_CHECK(from_bf16(gh[i]) == static_cast<float>(want[i]), "allreduce bf16 [{}]: {} != {}", i,
                           from_bf16(gh[i]), want[i]);
            report("i32 bf16 ");
        }
        // Reduce-scatter (avg) and all-gather: rank r gets chunk r of the mean; gathering the chunks back
        // gives the whole mean on every rank.
        {
            const size_t chunk = 250'001;
            DeviceBuf in(static_cast<int64_t>(chunk * world)), out(static_cast<int64_t>(chunk));
            in.put(values_of(rank, 4, chunk * world));
            pg.reduce_scatter(out.t(), in.t(), ReduceOp::kAvg);
            auto got = out.get<float>();
            auto want = expect_sum(4, chunk * world);
            for (size_t i = 0; i < chunk; ++i) {
                const double w = want[static_cast<size_t>(rank) * chunk + i] / world;
                LLMT_CHECK(std::abs(got[i] - w) <= 1e-6 * std::abs(w) + 1e-6, "reduce_scatter [{}]: {} != {}", i,
                           got[i], w);
            }
            DeviceBuf all(static_cast<int64_t>(chunk * world));
            pg.allgather(all.t(), out.t());
            auto g = all.get<float>();
            for (size_t i = 0; i < chunk * world; ++i) {
                const double w = want[i] / world;
                LLMT_CHECK(std::abs(g[i] - w) <= 1e-6 * std::abs(w) + 1e-6, "allgather [{}]: {} != {}", i, g[i], w);
            }
            report("reduce_scatter allgather ");
        }
        // Broadcast from the last rank; barrier.
        {
            DeviceBuf b(12'345);
            b.put(values_of(rank, 5, 12'345));
            pg.broadcast(b.t(), world - 1);
            auto got = b.get<float>();
            auto want = values_of(world - 1, 5, 12'345);
            for (size_t i = 0; i < got.size(); ++i) LLMT_CHECK(got[i] == want[i], "broadcast [{}]", i);
            pg.barrier();
            report("broadcast barrier ");
        }
        // A CPU tensor is refused (InputError), and the group stays usable.
        {
            float x = 1;
            try {
                pg.allreduce(Tensor(&x, {1}), ReduceOp::kSum);
                report("cpu-accepted ");
            } catch (const InputError& e) {
                report(std::string("cpu-refused[") + e.what() + "] ");
            }
            pg.barrier();
        }
    });
    expect_all_ok(rs);
    for (const auto& r : rs) {
        EXPECT_NE(r.message.find("sum avg i32 bf16 reduce_scatter allgather broadcast barrier"), std::string::npos)
            << r.message;
        EXPECT_NE(r.message.find("cpu-refused["), std::string::npos) << r.message;
        EXPECT_NE(r.message.find("must be a CUDA tensor for the nccl backend"), std::string::npos) << r.message;
    }
}

// One backward on the device: the buffer starts at g/2 everywhere, then "layers" last-to-first are
// doubled by a long chain of exact scalings queued on the compute stream (x2 then x0.5, 20 times, then
// x2), each followed by grads_ready_from(its offset) right after queueing, as the model's hook fires. A
// bucket all-reduced before the compute stream finished its layer would see g/2 or g*2^k, not g.
void device_backward(Reducer& red, DeviceBuf& buf, const std::vector<float>& g, bool sync) {
    std::vector<float> half(g.size());
    for (size_t i = 0; i < g.size(); ++i) half[i] = g[i] * 0.5f;
    buf.put(half);
    red.begin_backward(sync);
    size_t end = g.size();
    std::mt19937 gen(static_cast<uint32_t>(g.size()));
    float* base = static_cast<float*>(buf.t().data);
    while (end > 0) {
        const size_t len = std::min(end, static_cast<size_t>(1 + gen() % 40000));
        const size_t begin = end - len;
        Tensor layer(base + begin, {static_cast<int64_t>(len)}, DType::kF32, Device::kCuda);
        for (int k = 0; k < 20; ++k) {
            kernels::scale_inplace(layer, 2.f);
            kernels::scale_inplace(layer, 0.5f);
        }
        kernels::scale_inplace(layer, 2.f);
        red.grads_ready_from(begin * sizeof(float));
        end = begin;
    }
    red.finish();
}

std::vector<float> grads_of(int rank, int step, size_t n) {
    std::mt19937 gen(static_cast<uint32_t>(1000 * rank + step));
    std::uniform_real_distribution<float> d(-3.f, 3.f);
    std::vector<float> g(n);
    for (auto& v : g) v = d(gen);
    return g;
}

// Bucket sizes x overlap on/off x no_sync. For 2 ranks ncclAvg is g0*0.5 + g1*0.5 (NCCL pre-multiplies
// for averages), which equals (g0 + g1) / 2 exactly in f32 whatever the bucket cuts (scaling by 0.5 is
// exact, a + b is commutative), so every configuration must give the host's reference bit for bit.
TEST(NcclReducer, BucketsOverlapAndNoSyncGiveTheExactMean) {
    REQUIRE_GPUS(2);
    auto rs = run_ranks(2, 60s, [](ProcessGroup& pg, const Report& report) {
        const int rank = pg.rank();
        LLMT_CHECK(pg.has_async(), "nccl group without async collectives");
        for (size_t n : {size_t{1}, size_t{1000}, size_t{1'000'003}}) {
            DeviceBuf buf(static_cast<int64_t>(n));
            for (size_t bucket : {size_t{4}, size_t{4 * 1024 + 4}, size_t{1} << 20, size_t{64} << 20}) {
                if (n > 1000 && bucket == 4) continue;  // a million one-float all-reduces: slow, adds nothing
                for (bool overlap : {true, false}) {
                    Reducer red(pg, buf.t().data, n * sizeof(float), bucket, overlap, Device::kCuda);
                    // Bucket boundaries: cut from the end backwards, bucket bytes each, covering the arena.
                    auto ranges = red.bucket_ranges();
                    size_t expect_end = n * sizeof(float);
                    for (const auto& [off, len] : ranges) {
                        LLMT_CHECK(off + len == expect_end && len <= std::max<size_t>(bucket / 4 * 4, 4),
                                   "bucket [{}, +{}) for bucket_bytes {}", off, len, bucket);
                        expect_end = off;
                    }
                    LLMT_CHECK(expect_end == 0, "buckets leave the first {} bytes out", expect_end);
                    // no_sync micro-step: nothing communicated, the local gradient stays.
                    auto local = grads_of(rank, 0, n);
                    device_backward(red, buf, local, /*sync=*/false);
                    auto got = buf.get<float>();
                    for (size_t i = 0; i < n; ++i)
                        LLMT_CHECK(got[i] == local[i], "no_sync changed [{}] (n {}, bucket {}, overlap {})", i, n,
                                   bucket, overlap);
                    for (int step = 1; step <= 2; ++step) {
                        auto g = grads_of(rank, step, n), o = grads_of(1 - rank, step, n);
                        device_backward(red, buf, g, /*sync=*/true);
                        got = buf.get<float>();
                        for (size_t i = 0; i < n; ++i) {
                            const float want = (g[i] + o[i]) / 2.f;
                            LLMT_CHECK(got[i] == want,
                                       "mean [{}] = {}, expected {} (n {}, bucket {}, overlap {}, step {})", i, got[i],
                                       want, n, bucket, overlap, step);
                        }
                        LLMT_CHECK(red.last_stats().buckets == static_cast<int>(red.num_buckets()),
                                   "{} buckets reduced of {}", red.last_stats().buckets, red.num_buckets());
                    }
                }
            }
        }
        report("ok");
    });
    expect_all_ok(rs);
}

// A peer killed with SIGKILL (as the OOM killer or kill -9 would) while the survivor waits in a
// collective: the watchdog aborts the communicator at the timeout (or at once when NCCL reports the lost
// connection), and the survivor gets DistTimeout / DistError naming the group instead of hanging.
TEST(NcclProcessGroup, KilledPeerIsDistTimeoutWithinTheTimeout) {
    REQUIRE_GPUS(2);
    const auto timeout = 8s;
    auto rs = run_ranks(
        2, timeout,
        [](ProcessGroup& pg, const Report& report) {
            DeviceBuf b(1 << 20);
            b.put(values_of(pg.rank(), 6, 1 << 20));
            pg.allreduce(b.t(), ReduceOp::kSum);  // connections are up
            pg.barrier();
            if (pg.rank() == 1) ::raise(SIGKILL);
            const double t0 = testing::wall_now();
            try {
                for (int i = 0; i < 1000; ++i) pg.allreduce(b.t(), ReduceOp::kSum);
            } catch (...) {
                report(fmt::format("after {:.2f} s: ", testing::wall_now() - t0));
                throw;
            }
            report("survived 1000 all-reduces with a dead peer");
        },
        120);
    ASSERT_TRUE(rs[1].signaled) << describe(rs);
    // DistTimeout from the watchdog, or an earlier DistError when NCCL itself reports the closed
    // connections of the dead peer (ncclCommGetAsyncError); either names the group, neither hangs.
    ASSERT_TRUE(rs[0].error_type == "DistTimeout" || rs[0].error_type == "DistError") << describe(rs);
    EXPECT_NE(rs[0].message.find("nccl group nccl/r0/g0 (rank 0 of 2, GPU 0)"), std::string::npos) << describe(rs);
    EXPECT_NE(rs[0].message.find("the communicator was aborted"), std::string::npos) << describe(rs);
    const double secs = std::stod(rs[0].message.substr(6));
    // The watchdog checks every 50 ms; abort and unwinding take well under a second more. 4 s of slack
    // keeps a loaded machine from failing the test while any hang (or a wait of 2x the timeout) fails it.
    EXPECT_LT(secs, 8.0 + 4.0) << describe(rs);
    if (rs[0].error_type == "DistTimeout") {
        EXPECT_NE(rs[0].message.find("did not complete within 8.0 s"), std::string::npos) << describe(rs);
        EXPECT_GT(secs, 8.0 - 0.5) << describe(rs);
    }
    std::printf("survivor failed with %s after %.2f s (timeout 8 s)\n", rs[0].error_type.c_str(), secs);
}

// LOCAL_RANK beyond the visible GPUs is an InputError naming both (runs on any CUDA build: a machine
// without a GPU shows 0).
TEST(NcclProcessGroup, LocalRankBeyondTheGpusIsNamed) {
    if (!nccl_available()) {
        std::printf("SKIPPED: this build has no CUDA/NCCL (LLMTRAIN_CUDA=OFF)\n");
        GTEST_SKIP() << "built without CUDA";
    }
    const int n = visible_gpus();
    auto rs = run_children({[n](const Report&) { use_gpu_of_local_rank(n); }}, 60);
    EXPECT_EQ(rs[0].error_type, "InputError") << describe(rs);
    EXPECT_NE(rs[0].message.find(fmt::format("LOCAL_RANK={} but this process sees {} GPU", n, n)), std::string::npos)
        << describe(rs);
}

// Without CUDA the nccl backend is a clear DeviceError (the CPU build's path).
TEST(NcclProcessGroup, BuildWithoutCudaRefusesNccl) {
    if (nccl_available()) GTEST_SKIP() << "this build has NCCL";
    auto store = make_tcp_store("127.0.0.1", 0, true, 1, 5s);
    try {
        make_process_group("nccl", *store, 0, 1, 5s);
        FAIL() << "nccl accepted without CUDA";
    } catch (const DeviceError& e) {
        EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace llmt::dist
