// Reducer with 2 real processes: random gradients per rank written layer by layer in reverse arena
// order (as backward does), overlap on/off, several bucket sizes (one float, odd sizes, bigger than
// the arena) and arena sizes (one float up to 1M floats). For 2 ranks (a + b) / 2 in f32 is the same
// operation whichever rank adds first, so the result must equal the reference exactly.
#include <gtest/gtest.h>

#include <random>

#include "distributed/gloo_process_group.h"
#include "distributed/reducer.h"
#include "distributed/tcp_store.h"
#include "multiproc.h"

namespace llmt::dist {
namespace {

using namespace std::chrono_literals;
using testing::ChildFn;
using testing::describe;
using testing::run_children;
using Report = std::function<void(const std::string&)>;

std::vector<testing::ChildResult> run_pair(const std::function<void(GlooProcessGroup&, const Report&)>& fn) {
    testing::StoreHost host(2, 30s);
    const int port = host.port();
    std::vector<ChildFn> fns;
    for (int r = 0; r < 2; ++r) {
        fns.push_back([=](const Report& report) {
            TcpStore store("127.0.0.1", port, false, 2, 30s);
            rendezvous(store, r, 2, 30s);
            GlooProcessGroup pg(store, r, 2, 20s, GlooDevice{"", "127.0.0.1"});
            fn(pg, report);
        });
    }
    return run_children(fns, 240);
}

// Gradient of element i on `rank` at step `step`: random, seeded, different per rank.
std::vector<float> grads_of(int rank, int step, size_t n) {
    std::mt19937 gen(static_cast<uint32_t>(1000 * rank + step));
    std::uniform_real_distribution<float> d(-3.f, 3.f);
    std::vector<float> g(n);
    for (auto& v : g) v = d(gen);
    return g;
}

// One backward: "layers" of pseudo-random sizes, written last-to-first into `buf`, each followed by
// grads_ready_from(its offset). Bytes not written yet hold NaN, so a bucket launched too early poisons
// the result.
void backward(Reducer& red, std::vector<float>& buf, const std::vector<float>& g, bool sync) {
    std::fill(buf.begin(), buf.end(), std::numeric_limits<float>::quiet_NaN());
    red.begin_backward(sync);
    size_t end = buf.size();
    std::mt19937 gen(static_cast<uint32_t>(buf.size()));
    while (end > 0) {
        size_t len = std::min(end, static_cast<size_t>(1 + gen() % 40000));
        size_t begin = end - len;
        std::copy(g.begin() + static_cast<std::ptrdiff_t>(begin), g.begin() + static_cast<std::ptrdiff_t>(end),
                  buf.begin() + static_cast<std::ptrdiff_t>(begin));
        red.grads_ready_from(begin * sizeof(float));
        end = begin;
    }
    red.finish();
}

TEST(Reducer, AveragesAcrossRanksForEveryBucketingAndOverlap) {
    auto rs = run_pair([](GlooProcessGroup& pg, const Report& report) {
        int step = 0;
        for (size_t n : {size_t{1}, size_t{1000}, size_t{1'000'003}}) {
            for (size_t bucket_bytes : {size_t{4}, size_t{1000}, size_t{65536}, size_t{1} << 30}) {
                if (n > 1000 && bucket_bytes < 1000) continue;  // 1M one-float buckets would take minutes
                for (bool overlap : {true, false}) {
                    ++step;
                    std::vector<float> buf(n);
                    Reducer red(pg, buf.data(), n * sizeof(float), bucket_bytes, overlap);
                    const size_t per_bucket = std::max<size_t>(1, bucket_bytes / sizeof(float));
                    const size_t expected_buckets = (n + per_bucket - 1) / per_bucket;
                    if (red.num_buckets() != expected_buckets) throw std::runtime_error("bucket count");
                    auto mine = grads_of(pg.rank(), step, n);
                    auto a = grads_of(0, step, n), b = grads_of(1, step, n);
                    backward(red, buf, mine, true);
                    for (size_t i = 0; i < n; ++i) {
                        float want = (a[i] + b[i]) / 2.f;
                        if (buf[i] != want) {
                            throw std::runtime_error(fmt::format("n={} bucket={} overlap={}: element {} is {} not {}",
                                                                 n, bucket_bytes, overlap, i, buf[i], want));
                        }
                    }
                    auto st = red.last_stats();
                    if (st.buckets != static_cast<int>(expected_buckets) || st.comm_s <= 0) {
                        throw std::runtime_error(fmt::format("stats: {} buckets, comm {} s", st.buckets, st.comm_s));
                    }
                    report(fmt::format("{}:{}:{} ", n, bucket_bytes, st.buckets));
                }
            }
        }
    });
    for (const auto& r : rs) EXPECT_TRUE(r.ok) << describe(rs);
    // The bucket bigger than the arena is one bucket; 1000 floats in 1000-byte buckets are 4.
    EXPECT_NE(rs[0].message.find("1000:1073741824:1 "), std::string::npos) << rs[0].message;
    EXPECT_NE(rs[0].message.find("1000:1000:4 "), std::string::npos) << rs[0].message;
    EXPECT_NE(rs[0].message.find("1:4:1 "), std::string::npos) << rs[0].message;
}

TEST(Reducer, NoSyncLeavesGradientsUntouchedThenSyncs) {
    auto rs = run_pair([](GlooProcessGroup& pg, const Report&) {
        const size_t n = 50'000;
        std::vector<float> buf(n);
        Reducer red(pg, buf.data(), n * sizeof(float), 16384, true);
        for (int step = 0; step < 3; ++step) {
            auto mine = grads_of(pg.rank(), step, n);
            backward(red, buf, mine, /*sync=*/false);
            if (buf != mine) throw std::runtime_error("no_sync changed the gradients");
            if (red.last_stats().buckets != 0) throw std::runtime_error("no_sync communicated");
        }
        auto a = grads_of(0, 9, n), b = grads_of(1, 9, n);
        backward(red, buf, pg.rank() == 0 ? a : b, true);
        for (size_t i = 0; i < n; ++i) {
            if (buf[i] != (a[i] + b[i]) / 2.f) throw std::runtime_error("sync step after no_sync steps");
        }
    });
    for (const auto& r : rs) EXPECT_TRUE(r.ok) << describe(rs);
}

TEST(Reducer, CommunicationErrorIsRethrownByFinish) {
    // Rank 1 leaves only once rank 0 is past a barrier (a FileFlag): leaving right after the
    // constructor can close the pair while rank 0 is still connecting (seen in CI: "connecting rank 0
    // of 2 ... Connection closed by peer"; 23 of 200 runs here under load), and leaving right after
    // the barrier may still do the same to rank 0's barrier (2 unexplained failures in 1,760 loaded
    // runs with the barrier alone); either fails rank 0 before the Reducer's collective.
    const testing::FileFlag past_barrier("llmt_reducer_leave");
    auto rs = run_pair([&](GlooProcessGroup& pg, const Report&) {
        pg.barrier();
        if (pg.rank() == 1) {
            past_barrier.wait(30s);
            return;  // leaves: its connections close
        }
        past_barrier.raise();
        std::vector<float> buf(100'000, 1.f);
        Reducer red(pg, buf.data(), buf.size() * sizeof(float), 4096, true);
        red.begin_backward(true);
        red.grads_ready_from(0);
        red.finish();
    });
    EXPECT_EQ(rs[0].error_type, "DistError") << describe(rs);
    EXPECT_NE(rs[0].message.find("rank 1"), std::string::npos) << describe(rs);
    EXPECT_TRUE(rs[1].ok) << describe(rs);
}

}  // namespace
}  // namespace llmt::dist
