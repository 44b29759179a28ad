// DataLoader / EvalLoader (src/data/shards/loader.h): W = 1..4 ranks read the W = 1 global batch without
// overlap, every window once per epoch, exact resume (also across an epoch boundary), eval layout.
// Token i of the test stream has id i % kMod, so a window is identified by its first input token.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/shards/loader.h"
#include "data/shards/shard_writer.h"
#include "test_files.h"

namespace llmt::data {
namespace {

using testing::TempDir;
using testing::write_bytes;

constexpr uint32_t kVocab = 50257;

// Writes `n` tokens 0, 1, 2, ... (ids < kVocab) into shards of `per_shard` tokens; returns the paths.
std::vector<std::string> make_stream(const TempDir& d, std::size_t n, std::size_t per_shard) {
    std::vector<uint32_t> toks(n);
    std::iota(toks.begin(), toks.end(), 0u);
    ShardWriter w(d.path(), "train", per_shard, kVocab);
    w.append(toks);
    std::vector<std::string> paths;
    for (const auto& s : w.finish()) paths.push_back((d / s.file).string());
    return paths;
}

LoaderOptions opts(const std::vector<std::string>& paths, int B, int T, int rank, int world, uint64_t seed = 7) {
    LoaderOptions o;
    o.shard_paths = paths;
    o.B = B;
    o.T = T;
    o.rank = rank;
    o.world = world;
    o.seed = seed;
    o.vocab_size = kVocab;
    return o;
}

// One next() call; returns the window index of each row (first input token / T) after checking that
// each row is T consecutive tokens and targets are inputs shifted by one.
std::vector<std::size_t> next_windows(DataLoader& dl, int B, int T) {
    std::vector<int32_t> x(static_cast<std::size_t>(B * T)), y(x.size());
    dl.next(x.data(), y.data());
    std::vector<std::size_t> w;
    for (int b = 0; b < B; ++b) {
        const int32_t* row = x.data() + b * T;
        EXPECT_EQ(row[0] % T, 0) << "rows start on a window boundary";
        for (int t = 0; t < T; ++t) {
            EXPECT_EQ(row[t], row[0] + t);
            EXPECT_EQ(y[static_cast<std::size_t>(b * T + t)], row[t] + 1);
        }
        w.push_back(static_cast<std::size_t>(row[0] / T));
    }
    return w;
}

TEST(DataLoader, WindowsAndShapes) {
    TempDir d;
    // 101 tokens, T = 10: windows [0,10], [10,20], ..., [90,100] -> 10 windows; spans 3 shards.
    auto paths = make_stream(d, 101, 40);
    DataLoader dl(opts(paths, 2, 10, 0, 1));
    EXPECT_EQ(dl.num_windows(), 10u);
    EXPECT_EQ(dl.total_tokens(), 101u);
    DataLoader small(opts(paths, 1, 100, 0, 1));
    EXPECT_EQ(small.num_windows(), 1u);
    EXPECT_THROW(DataLoader(opts(paths, 1, 101, 0, 1)), InputError);  // no window of 102 tokens
    EXPECT_THROW(DataLoader(opts(paths, 0, 10, 0, 1)), InternalError);
    EXPECT_THROW(DataLoader(opts(paths, 1, 10, 2, 2)), InternalError);
}

TEST(DataLoader, RanksSplitTheSameGlobalBatchWithoutOverlap) {
    TempDir d;
    constexpr int T = 8, Bglobal = 12;
    auto paths = make_stream(d, 8 * 150 + 1, 333);  // 150 windows over 4 shards
    constexpr int kSteps = 40;                      // 480 windows: 3.2 epochs, so batches straddle epochs
    // W = 1 reference: the global batches.
    DataLoader ref(opts(paths, Bglobal, T, 0, 1));
    std::vector<std::vector<std::size_t>> global;
    for (int s = 0; s < kSteps; ++s) global.push_back(next_windows(ref, Bglobal, T));
    // Every epoch (150 consecutive positions) is a permutation of all windows.
    std::vector<std::size_t> flat;
    for (auto& g : global) flat.insert(flat.end(), g.begin(), g.end());
    for (std::size_t e = 0; e + 150 <= flat.size(); e += 150) {
        std::vector<std::size_t> ep(flat.begin() + static_cast<long>(e), flat.begin() + static_cast<long>(e + 150));
        std::sort(ep.begin(), ep.end());
        for (std::size_t i = 0; i < 150; ++i) ASSERT_EQ(ep[i], i) << "epoch at position " << e;
    }
    // The shuffle differs between epochs.
    EXPECT_FALSE(std::equal(flat.begin(), flat.begin() + 150, flat.begin() + 150));
    for (int W : {2, 3, 4}) {
        const int B = Bglobal / W;
        std::vector<DataLoader> ranks;
        for (int r = 0; r < W; ++r) ranks.emplace_back(opts(paths, B, T, r, W));
        for (int s = 0; s < kSteps; ++s) {
            std::vector<std::size_t> joined;
            for (int r = 0; r < W; ++r) {
                auto w = next_windows(ranks[static_cast<std::size_t>(r)], B, T);
                joined.insert(joined.end(), w.begin(), w.end());
            }
            ASSERT_EQ(joined, global[static_cast<std::size_t>(s)]) << "W=" << W << " step " << s;
        }
        for (auto& r : ranks) EXPECT_EQ(r.position(), static_cast<uint64_t>(kSteps * Bglobal));
    }
}

TEST(DataLoader, RanksNeverShareAWindowWithinAnEpoch) {
    TempDir d;
    constexpr int T = 4;
    auto paths = make_stream(d, 4 * 97 + 1, 1000);  // 97 windows, a prime: no batch divides it
    for (int W = 1; W <= 4; ++W) {
        constexpr int B = 3;
        std::vector<std::set<std::size_t>> seen(8);  // per epoch: windows seen by any rank
        for (int r = 0; r < W; ++r) {
            DataLoader dl(opts(paths, B, T, r, W, 99));
            for (int s = 0; s < 60; ++s) {
                const uint64_t first = dl.position() + static_cast<uint64_t>(r * B);
                auto w = next_windows(dl, B, T);
                for (int j = 0; j < B; ++j) {
                    const uint64_t q = first + static_cast<uint64_t>(j);
                    ASSERT_TRUE(seen[q / 97].insert(w[static_cast<std::size_t>(j)]).second)
                        << "W=" << W << " rank " << r << " repeats window " << w[static_cast<std::size_t>(j)]
                        << " in epoch " << q / 97;
                }
            }
        }
        // Complete epochs were covered exactly.
        const uint64_t consumed = static_cast<uint64_t>(60 * B * W);
        for (uint64_t e = 0; e < consumed / 97; ++e) EXPECT_EQ(seen[e].size(), 97u) << "W=" << W;
    }
}

TEST(DataLoader, SeedAndShuffleControlTheOrder) {
    TempDir d;
    auto paths = make_stream(d, 5 * 50 + 1, 1000);
    auto first_epoch = [&](uint64_t seed, bool shuffle) {
        auto o = opts(paths, 10, 5, 0, 1, seed);
        o.shuffle = shuffle;
        DataLoader dl(o);
        std::vector<std::size_t> all;
        for (int s = 0; s < 5; ++s) {
            auto w = next_windows(dl, 10, 5);
            all.insert(all.end(), w.begin(), w.end());
        }
        return all;
    };
    EXPECT_EQ(first_epoch(1, true), first_epoch(1, true));
    EXPECT_NE(first_epoch(1, true), first_epoch(2, true));
    std::vector<std::size_t> seq(50);
    std::iota(seq.begin(), seq.end(), 0u);
    EXPECT_EQ(first_epoch(1, false), seq);
    EXPECT_EQ(epoch_permutation(50, 1, 0).size(), 50u);
}

TEST(DataLoader, StateRestoreReproducesTheNextBatchAcrossEpochs) {
    TempDir d;
    constexpr int T = 6, B = 4, W = 2;
    auto paths = make_stream(d, 6 * 23 + 1, 50);  // 23 windows: batches of 8 straddle epochs
    for (int steps_before : {0, 1, 2, 3, 5, 11}) {
        for (int r = 0; r < W; ++r) {
            DataLoader a(opts(paths, B, T, r, W));
            for (int s = 0; s < steps_before; ++s) next_windows(a, B, T);
            const auto st = a.state();
            // Through text, as a checkpoint stores it.
            const auto parsed = nlohmann::json::parse(st.dump());
            DataLoader b(opts(paths, B, T, r, W));
            b.restore(parsed);
            EXPECT_EQ(b.position(), a.position());
            EXPECT_EQ(b.epoch(), a.epoch());
            for (int s = 0; s < 4; ++s) {
                std::vector<int32_t> xa(B * T), ya(B * T), xb(B * T), yb(B * T);
                a.next(xa.data(), ya.data());
                b.next(xb.data(), yb.data());
                ASSERT_EQ(xa, xb) << "after " << steps_before << " steps, rank " << r << ", step " << s;
                ASSERT_EQ(ya, yb);
            }
        }
    }
    // A state taken at W = 2, B = 4 restores into W = 1, B = 8 (the position counts windows).
    DataLoader two(opts(paths, B, T, 0, W));
    for (int s = 0; s < 3; ++s) next_windows(two, B, T);
    DataLoader one(opts(paths, B * W, T, 0, 1));
    one.restore(two.state());
    auto w1 = next_windows(one, B * W, T);
    auto w2 = next_windows(two, B, T);
    EXPECT_TRUE(std::equal(w2.begin(), w2.end(), w1.begin()));
}

TEST(DataLoader, RestoreRejectsMismatchedOrBrokenStatesNamingTheField) {
    TempDir d;
    auto paths = make_stream(d, 6 * 23 + 1, 50);
    DataLoader a(opts(paths, 2, 6, 0, 1));
    next_windows(a, 2, 6);
    const auto st = a.state();
    auto expect_field = [&](const nlohmann::json& s, const std::string& field, DataLoader& target) {
        try {
            target.restore(s);
            ADD_FAILURE() << "restore accepted a bad state for " << field;
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find("'" + field + "'"), std::string::npos) << e.what();
        }
    };
    DataLoader other_seed(opts(paths, 2, 6, 0, 1, 8));
    expect_field(st, "seed", other_seed);
    DataLoader other_t(opts(paths, 2, 5, 0, 1));
    expect_field(st, "num_windows", other_t);  // 27 windows at T=5 vs 23 at T=6
    DataLoader fresh(opts(paths, 2, 6, 0, 1));
    for (const char* f : {"position", "seq_len", "kind", "shuffle"}) {
        auto s = st;
        s.erase(f);
        expect_field(s, f, fresh);
    }
    auto s = st;
    s["position"] = -3;
    expect_field(s, "position", fresh);
    s = st;
    s["cursor"] = 5;
    expect_field(s, "cursor", fresh);
    EXPECT_EQ(fresh.position(), 0u) << "a failed restore leaves the position alone";
}

TEST(DataLoader, BadTokenIdIsAFormatErrorNamingFileAndOffset) {
    TempDir d;
    std::vector<uint32_t> toks(41, 5);
    toks[33] = 60000;  // >= vocab 50257
    write_shard_file(d / "train_000000.bin", toks, 65536);
    auto o = opts({(d / "train_000000.bin").string()}, 1, 10, 0, 1);
    o.shuffle = false;
    DataLoader dl(o);
    std::vector<int32_t> x(10), y(10);
    dl.next(x.data(), y.data());  // windows 0..2 hold tokens 0..30
    dl.next(x.data(), y.data());
    dl.next(x.data(), y.data());
    try {
        dl.next(x.data(), y.data());  // window 3: tokens 30..40
        ADD_FAILURE();
    } catch (const FormatError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("train_000000.bin"), std::string::npos) << msg;
        EXPECT_NE(msg.find("byte offset " + std::to_string(1024 + 33 * 2)), std::string::npos) << msg;
    }
}

TEST(DataLoader, ReadsNanoGptFiles) {
    TempDir d;
    std::vector<uint16_t> toks(21);
    std::iota(toks.begin(), toks.end(), uint16_t{0});
    write_bytes(d / "train.bin", std::string(reinterpret_cast<const char*>(toks.data()), toks.size() * 2));
    auto o = opts({(d / "train.bin").string()}, 2, 5, 0, 1);
    o.format = ShardFormat::kNanoGptU16;
    o.shuffle = false;
    DataLoader dl(o);
    EXPECT_EQ(dl.num_windows(), 4u);
    EXPECT_EQ(next_windows(dl, 2, 5), (std::vector<std::size_t>{0, 1}));
}

TEST(EvalLoader, RowRofBatchBStartsAtTokenBBplusRTimesT) {
    TempDir d;
    constexpr int T = 7, B = 3;
    auto paths = make_stream(d, 7 * 20 + 1, 30);  // 20 windows over 5 shards
    EvalLoaderOptions o;
    o.shard_paths = paths;
    o.B = B;
    o.T = T;
    o.vocab_size = kVocab;
    EvalLoader ev(o);
    EXPECT_EQ(ev.num_windows(), 20u);
    EXPECT_EQ(ev.num_batches(), 6u);
    std::vector<int32_t> x(B * T), y(B * T);
    for (std::size_t b = 0; b < ev.num_batches(); ++b) {
        ev.batch(b, x.data(), y.data());
        for (int r = 0; r < B; ++r) {
            for (int t = 0; t < T; ++t) {
                ASSERT_EQ(x[static_cast<std::size_t>(r * T + t)],
                          static_cast<int32_t>((b * B + static_cast<std::size_t>(r)) * T) + t);
                ASSERT_EQ(y[static_cast<std::size_t>(r * T + t)], x[static_cast<std::size_t>(r * T + t)] + 1);
            }
        }
    }
    EXPECT_THROW(ev.batch(6, x.data(), y.data()), InternalError);
    // W = 2 with B = 3: rank r's rows of batch b are rows r*3.. of the W = 1, B = 6 batch b.
    EvalLoaderOptions o6 = o;
    o6.B = 6;
    EvalLoader ev6(o6);
    for (int r = 0; r < 2; ++r) {
        EvalLoaderOptions orank = o;
        orank.rank = r;
        orank.world = 2;
        EvalLoader er(orank);
        ASSERT_EQ(er.num_batches(), ev6.num_batches());
        for (std::size_t b = 0; b < er.num_batches(); ++b) {
            std::vector<int32_t> x6(6 * T), y6(6 * T);
            ev6.batch(b, x6.data(), y6.data());
            er.batch(b, x.data(), y.data());
            ASSERT_TRUE(std::equal(x.begin(), x.end(), x6.begin() + r * B * T)) << "rank " << r << " batch " << b;
        }
    }
    o.B = 21;  // more rows than windows
    EXPECT_THROW(EvalLoader{o}, InputError);
}

}  // namespace
}  // namespace llmt::data
