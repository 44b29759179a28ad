// GlooProcessGroup with 2 and 3 real processes on 127.0.0.1: every collective against a plain
// reference computed in the test (integer-valued f32 data, so sums are exact), and the failure modes:
// kill -9 of a peer mid-collective and a peer that never calls the collective.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "distributed/gloo_process_group.h"
#include "distributed/tcp_store.h"
#include "multiproc.h"
#include "support/compare.h"

namespace llmt::dist {
namespace {

using namespace std::chrono_literals;
using testing::ChildFn;
using testing::describe;
using testing::run_children;
using testing::wall_now;
using Report = std::function<void(const std::string&)>;

// Throws (the child reports it) when got != want, naming the first differing index.
template <typename T>
void require_equal(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
    if (const auto c = support::comparable(got, want); !c) throw std::runtime_error(what + ": " + c.message());
    for (size_t i = 0; i < got.size(); ++i) {
        if (got[i] != want[i]) {
            throw std::runtime_error(
                fmt::format("{}: element {} is {} but {} was expected", what, i, got[i], want[i]));
        }
    }
}

// Runs fn(pg, report) on `world` forked ranks that meet through a store served by a StoreHost.
std::vector<testing::ChildResult> run_group(int world, std::chrono::milliseconds timeout,
                                            const std::function<void(GlooProcessGroup&, const Report&)>& fn,
                                            double deadline_s = 120,
                                            const std::function<void(const std::vector<pid_t>&)>& while_running = {}) {
    testing::StoreHost host(world, 30s);
    const int port = host.port();
    std::vector<ChildFn> fns;
    for (int r = 0; r < world; ++r) {
        fns.push_back([=](const Report& report) {
            TcpStore store("127.0.0.1", port, false, world, 30s);
            rendezvous(store, r, world, 30s);
            GlooProcessGroup pg(store, r, world, timeout, GlooDevice{"", "127.0.0.1"});
            fn(pg, report);
        });
    }
    return run_children(fns, deadline_s, while_running);
}

class GlooCollectives : public ::testing::TestWithParam<int> {};

TEST_P(GlooCollectives, MatchThePlainReference) {
    const int P = GetParam();
    auto rs = run_group(P, 30s, [P](GlooProcessGroup& pg, const Report&) {
        const int r = pg.rank();
        if (pg.size() != P || pg.backend() != "gloo") throw std::runtime_error("rank/size/backend wrong");

        // allreduce f32, sum and average; 3M elements spans many of Gloo's 1 MiB segments.
        for (size_t n : {size_t{1}, size_t{1000}, size_t{3'000'001}}) {
            auto value = [](int rank, size_t i) {
                return static_cast<float>((rank + 1) * static_cast<int>(i % 1000));
            };
            std::vector<float> x(n), want(n), want_avg(n);
            for (size_t i = 0; i < n; ++i) {
                x[i] = value(r, i);
                float s = 0;
                for (int q = 0; q < P; ++q) s += value(q, i);
                want[i] = s;
                want_avg[i] = s / static_cast<float>(P);
            }
            std::vector<float> y = x;
            pg.allreduce(Tensor(x.data(), {static_cast<int64_t>(n)}), ReduceOp::kSum);
            require_equal(x, want, fmt::format("allreduce sum n={}", n));
            pg.allreduce(Tensor(y.data(), {static_cast<int64_t>(n)}), ReduceOp::kAvg);
            require_equal(y, want_avg, fmt::format("allreduce avg n={}", n));
        }
        // allreduce i32 (counters).
        std::vector<int32_t> c = {r, 1, 1000 * r};
        pg.allreduce(Tensor(c.data(), {3}, DType::kI32), ReduceOp::kSum);
        require_equal(c, {P * (P - 1) / 2, P, 1000 * P * (P - 1) / 2}, "allreduce i32");

        // reduce_scatter: chunk k of rank q holds q*10000 + k*100 + (j % 97).
        for (size_t n : {size_t{1}, size_t{1007}}) {
            std::vector<float> in(n * static_cast<size_t>(P)), out(n, -1.f), want(n);
            for (size_t k = 0; k < static_cast<size_t>(P); ++k) {
                for (size_t j = 0; j < n; ++j)
                    in[k * n + j] =
                        static_cast<float>(r * 10000 + static_cast<int>(k) * 100 + static_cast<int>(j % 97));
            }
            for (size_t j = 0; j < n; ++j) {
                float s = 0;
                for (int q = 0; q < P; ++q) s += static_cast<float>(q * 10000 + r * 100 + static_cast<int>(j % 97));
                want[j] = s;
            }
            std::vector<float> in_copy = in;
            pg.reduce_scatter(Tensor(out.data(), {static_cast<int64_t>(n)}),
                              Tensor(in.data(), {static_cast<int64_t>(n) * P}), ReduceOp::kSum);
            require_equal(out, want, fmt::format("reduce_scatter sum n={}", n));
            require_equal(in, in_copy, "reduce_scatter leaves its input alone");
            pg.reduce_scatter(Tensor(out.data(), {static_cast<int64_t>(n)}),
                              Tensor(in.data(), {static_cast<int64_t>(n) * P}), ReduceOp::kAvg);
            for (auto& w : want) w /= static_cast<float>(P);
            require_equal(out, want, fmt::format("reduce_scatter avg n={}", n));
        }

        // In place (out is chunk r of in, as ZeRO-1 reduces its gradient arena): the same sums, with a chunk
        // longer than the ring's 1 Mi-element segments so the segmented path runs too.
        for (size_t n : {size_t{3}, (size_t{1} << 20) + 5}) {
            auto value = [](int rank, size_t k, size_t j) {
                return static_cast<float>(rank * 10000 + static_cast<int>(k) * 100 + static_cast<int>(j % 97));
            };
            std::vector<float> buf(n * static_cast<size_t>(P));
            for (size_t k = 0; k < static_cast<size_t>(P); ++k)
                for (size_t j = 0; j < n; ++j) buf[k * n + j] = value(r, k, j);
            std::vector<float> want(n);
            for (size_t j = 0; j < n; ++j) {
                float s = 0;
                for (int q = 0; q < P; ++q) s += value(q, static_cast<size_t>(r), j);
                want[j] = s / static_cast<float>(P);
            }
            float* mine = buf.data() + static_cast<size_t>(r) * n;
            pg.reduce_scatter(Tensor(mine, {static_cast<int64_t>(n)}),
                              Tensor(buf.data(), {static_cast<int64_t>(buf.size())}), ReduceOp::kAvg);
            require_equal(std::vector<float>(mine, mine + n), want, fmt::format("reduce_scatter in place n={}", n));
            // All-gather in place: chunk q ends as rank q's reduced chunk.
            pg.allgather(Tensor(buf.data(), {static_cast<int64_t>(buf.size())}),
                         Tensor(mine, {static_cast<int64_t>(n)}));
            for (int q = 0; q < P; ++q) {
                for (size_t j = 0; j < n; j += 4099) {
                    float s = 0;
                    for (int o = 0; o < P; ++o) s += value(o, static_cast<size_t>(q), j);
                    const float w = s / static_cast<float>(P), got = buf[static_cast<size_t>(q) * n + j];
                    if (got != w)
                        throw std::runtime_error(fmt::format(
                            "allgather in place n={}: chunk {} element {} is {}, expected {}", n, q, j, got, w));
                }
            }
        }

        // allgather: rank q contributes q*1000 + j.
        {
            const size_t n = 513;
            std::vector<float> in(n), out(n * static_cast<size_t>(P), -1.f), want(out.size());
            for (size_t j = 0; j < n; ++j) in[j] = static_cast<float>(r * 1000 + static_cast<int>(j));
            for (int q = 0; q < P; ++q) {
                for (size_t j = 0; j < n; ++j)
                    want[static_cast<size_t>(q) * n + j] = static_cast<float>(q * 1000 + static_cast<int>(j));
            }
            pg.allgather(Tensor(out.data(), {static_cast<int64_t>(out.size())}),
                         Tensor(in.data(), {static_cast<int64_t>(n)}));
            require_equal(out, want, "allgather");
        }

        // broadcast from the last rank and from rank 0.
        for (int root : {P - 1, 0}) {
            std::vector<float> b(777), want(777);
            for (size_t j = 0; j < b.size(); ++j) {
                want[j] = static_cast<float>(root * 7 + static_cast<int>(j));
                b[j] = r == root ? want[j] : -5.f;
            }
            pg.broadcast(Tensor(b.data(), {777}), root);
            require_equal(b, want, fmt::format("broadcast root {}", root));
        }

        // barrier: the last rank arrives 0.5 s late; nobody may leave before it arrived.
        if (r == P - 1) std::this_thread::sleep_for(500ms);
        double t0 = wall_now();
        pg.barrier();
        std::vector<float> t = {static_cast<float>(wall_now() - t0)};
        // Everyone gathers how long they waited: ranks other than the late one waited ~0.5 s.
        std::vector<float> all(static_cast<size_t>(P));
        pg.allgather(Tensor(all.data(), {P}), Tensor(t.data(), {1}));
        for (int q = 0; q < P - 1; ++q) {
            if (all[static_cast<size_t>(q)] < 0.3f) {
                throw std::runtime_error(fmt::format("barrier: rank {} left after {} s, before the late rank came", q,
                                                     all[static_cast<size_t>(q)]));
            }
        }
    });
    for (const auto& r : rs) EXPECT_TRUE(r.ok) << describe(rs);
}

// The engine passes these tensors, so wrong ones are internal errors (exit 1), not bad input.
TEST_P(GlooCollectives, WrongArgumentsAreInternalErrors) {
    const int P = GetParam();
    auto rs = run_group(P, 30s, [P](GlooProcessGroup& pg, const Report& report) {
        std::vector<float> a(6);
        std::vector<int32_t> i(6);
        int thrown = 0;
        auto expect_internal_error = [&](const std::function<void()>& f) {
            try {
                f();
            } catch (const InternalError&) {
                ++thrown;
            }
        };
        expect_internal_error(
            [&] { pg.reduce_scatter(Tensor(a.data(), {5}), Tensor(a.data(), {6}), ReduceOp::kSum); });
        expect_internal_error([&] { pg.allgather(Tensor(a.data(), {5}), Tensor(a.data(), {2})); });
        expect_internal_error([&] { pg.allreduce(Tensor(i.data(), {6}, DType::kI32), ReduceOp::kAvg); });
        expect_internal_error([&] { pg.allreduce(Tensor(a.data(), {3}, DType::kBF16), ReduceOp::kSum); });
        expect_internal_error([&] { pg.broadcast(Tensor(a.data(), {6}), P); });
        report(std::to_string(thrown));
        pg.barrier();  // the group still works: argument checks happen before any communication
    });
    for (const auto& r : rs) {
        EXPECT_TRUE(r.ok) << describe(rs);
        EXPECT_EQ(r.message, "5");
    }
}

INSTANTIATE_TEST_SUITE_P(Worlds, GlooCollectives, ::testing::Values(2, 3),
                         [](const auto& tp) { return "world" + std::to_string(tp.param); });

class GlooFaults : public ::testing::TestWithParam<int> {};

// kill -9 of the last rank while every rank loops over 1M-float all-reduces: each survivor throws a
// DistError naming rank <last> within timeout + 5 s of the kill.
TEST_P(GlooFaults, KillNineMidCollectiveNamesTheLostPeer) {
    const int P = GetParam();
    const auto timeout = 5s;
    const testing::FileFlag looping("llmt_pg_kill_" + std::to_string(P));
    double kill_time = 0;
    auto rs = run_group(
        P, timeout,
        [&](GlooProcessGroup& pg, const Report& report) {
            std::vector<float> x(1 << 20, 1.f);
            for (int it = 0; it < 100000; ++it) {
                if (it == 3 && pg.rank() == P - 1) looping.raise();
                pg.allreduce(Tensor(x.data(), {1 << 20}), ReduceOp::kAvg);
            }
            report("the loop finished without noticing the dead peer");
        },
        60,
        [&](const std::vector<pid_t>& pids) {
            looping.wait(30s);
            std::this_thread::sleep_for(100ms);  // several all-reduces later: mid-collective
            kill_time = wall_now();
            kill(pids.back(), SIGKILL);
        });
    ASSERT_GT(kill_time, 0);
    EXPECT_TRUE(rs.back().signaled && rs.back().signal == SIGKILL) << describe(rs);
    const std::string lost = "rank " + std::to_string(P - 1);
    for (int r = 0; r < P - 1; ++r) {
        const auto& c = rs[static_cast<size_t>(r)];
        EXPECT_FALSE(c.timed_out) << describe(rs);
        EXPECT_TRUE(c.error_type == "DistError" || c.error_type == "DistTimeout") << describe(rs);
        EXPECT_NE(c.message.find(lost), std::string::npos) << "survivor " << r << " does not name " << lost << "\n"
                                                           << describe(rs);
        EXPECT_LT(c.end_time - kill_time, 5.0 + 5.0) << describe(rs);
    }
}

// A peer that is alive but never calls the collective: a DistTimeout after the timeout, not a hang.
TEST_P(GlooFaults, PeerThatNeverCallsIsATimeout) {
    const int P = GetParam();
    auto rs = run_group(P, 1s, [&](GlooProcessGroup& pg, const Report& report) {
        if (pg.rank() == P - 1) {
            std::this_thread::sleep_for(6s);  // alive, silent, longer than the others' timeout + slack
            return;
        }
        std::vector<float> x(1000, 1.f);
        double t0 = wall_now();
        try {
            pg.allreduce(Tensor(x.data(), {1000}), ReduceOp::kSum);
        } catch (...) {
            report(fmt::format("{:.3f}", wall_now() - t0));
            throw;
        }
    });
    for (int r = 0; r < P - 1; ++r) {
        const auto& c = rs[static_cast<size_t>(r)];
        EXPECT_EQ(c.error_type, "DistTimeout") << describe(rs);
        EXPECT_NE(c.message.find("allreduce"), std::string::npos) << describe(rs);
        // The message is "<seconds>" reported before rethrow, then the error text.
        double waited = std::stod(c.message.substr(0, c.message.find_first_not_of("0123456789.")));
        EXPECT_GE(waited, 0.9) << describe(rs);
        EXPECT_LT(waited, 1.0 + 5.0) << describe(rs);  // timeout + a few s on a loaded machine
    }
    EXPECT_TRUE(rs.back().ok) << describe(rs);
}

INSTANTIATE_TEST_SUITE_P(Worlds, GlooFaults, ::testing::Values(2, 3),
                         [](const auto& tp) { return "world" + std::to_string(tp.param); });

}  // namespace
}  // namespace llmt::dist
