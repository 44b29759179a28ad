// Store base and the rendezvous protocol on top of any Store (see store.h).
#include "distributed/store.h"

#include <fmt/format.h>
#include <unistd.h>

#include <thread>

#include "core/error.h"
#include "distributed/tcp_store.h"

namespace llmt::dist {

Store::~Store() = default;

namespace {

std::string identity() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return fmt::format("{} pid {}", host, ::getpid());
}

// Publishes the error so that every rank still waiting reports it, then throws it here.
[[noreturn]] void fail(Store& store, const std::string& prefix, const std::string& msg) {
    try {
        store.set(prefix + "error", msg);
    } catch (const Error&) {
        // the store itself failed: this rank still reports the original problem
    }
    throw DistError(msg);
}

}  // namespace

void rendezvous(Store& store, int rank, int world_size, std::chrono::milliseconds timeout,
                const std::string& prefix) {
    const std::string me = identity();
    if (rank < 0 || rank >= world_size) {
        fail(store, prefix,
             fmt::format("rendezvous: rank {} ({}) is outside 0..{} (WORLD_SIZE={})", rank, me, world_size - 1,
                         world_size));
    }

    // 1. World size: the first rank to arrive records its WORLD_SIZE; every later one compares.
    if (store.add(prefix + "world_size_claim", 1) == 1) {
        store.set(prefix + "world_size", fmt::format("{}\n{}\n{}", world_size, rank, me));
    }
    std::string first = store.get(prefix + "world_size");
    int first_ws = std::stoi(first.substr(0, first.find('\n')));
    if (first_ws != world_size) {
        auto rest = first.substr(first.find('\n') + 1);
        auto first_rank = rest.substr(0, rest.find('\n'));
        auto first_who = rest.substr(rest.find('\n') + 1);
        fail(store, prefix,
             fmt::format("world size mismatch: rank {} ({}) has WORLD_SIZE={} but rank {} ({}) has "
                         "WORLD_SIZE={}\nhint: every rank must be started with the same WORLD_SIZE",
                         rank, me, world_size, first_rank, first_who, first_ws));
    }

    // 2. Rank uniqueness: the n-th process to claim rank r records itself under rank/r/n.
    const std::string rank_key = fmt::format("{}rank/{}", prefix, rank);
    int64_t n = store.add(rank_key, 1);
    store.set(fmt::format("{}/{}", rank_key, n), me);
    if (n > 1) {
        std::string other = store.get(rank_key + "/1");
        fail(store, prefix,
             fmt::format("duplicate rank {}: registered by {} and again by {}\nhint: check RANK (or "
                         "--node-rank) on every process",
                         rank, other, me));
    }

    // 3. Wait for ranks 0..world_size-1, or for an error any rank published.
    std::vector<std::string> keys;
    for (int r = 0; r < world_size; ++r) keys.push_back(fmt::format("{}rank/{}/1", prefix, r));
    auto deadline = std::chrono::steady_clock::now() + timeout;
    auto sleep = std::chrono::milliseconds(2);
    for (;;) {
        if (store.check({prefix + "error"})) throw DistError(store.get(prefix + "error"));
        if (store.check(keys)) break;
        if (std::chrono::steady_clock::now() >= deadline) {
            std::string missing;
            int n_missing = 0;
            for (int r = 0; r < world_size; ++r) {
                if (!store.check({keys[static_cast<size_t>(r)]})) {
                    missing += (missing.empty() ? "" : ", ") + std::to_string(r);
                    ++n_missing;
                }
            }
            throw DistTimeout(fmt::format(
                "rendezvous at {}: rank{} {} of {} did not arrive within {:.1f} s (this is rank {}, {})",
                store.describe(), n_missing > 1 ? "s" : "", missing, world_size, timeout.count() / 1000.0, rank,
                me));
        }
        std::this_thread::sleep_for(sleep);
        sleep = std::min(sleep * 2, std::chrono::milliseconds(50));
    }
    // A duplicate that arrives while the others still wait is reported on every rank by step 3;
    // read the error key once more so that one arriving together with the last rank is too.
    if (store.check({prefix + "error"})) throw DistError(store.get(prefix + "error"));
}

}  // namespace llmt::dist
