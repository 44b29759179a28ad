// Optimizer state resharding (optim/state_shards.h): AdamW and SGD state saved as 3 slices continues
// bit for bit as 2 slices and as the whole arena (and the whole as 3 slices), and the errors for shards
// that overlap, leave a gap, come from different steps or another arena, or lack a tensor.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <random>

#include "core/error.h"
#include "core/safetensors.h"
#include "optim/adamw.h"
#include "optim/sgd.h"

namespace fs = std::filesystem;
using namespace llmt;
using namespace llmt::optim;

namespace {

// w (4x6, decay), b (6), 3 padding elements, ln (5), w2 (3x7, decay): slots straddle the cuts below.
std::vector<ParamSlot> slots() {
    return {{"w", {4, 6}, 0, true}, {"b", {6}, 24, false}, {"ln", {5}, 33, false}, {"w2", {3, 7}, 38, true}};
}
constexpr std::size_t kArena = 59;

std::vector<float> randn(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

using Make = std::function<std::unique_ptr<Optimizer>(ArenaSlice)>;

std::unique_ptr<Optimizer> adamw(ArenaSlice s) { return std::make_unique<AdamW>(slots(), kArena, AdamWConfig{}, s); }
std::unique_ptr<Optimizer> sgd(ArenaSlice s) {
    SgdConfig c;
    c.nesterov = true;
    c.weight_decay = 0.01f;
    return std::make_unique<Sgd>(slots(), kArena, c, s);
}

// Optimizers covering the arena cut at `cuts`.
std::vector<std::unique_ptr<Optimizer>> sliced(const Make& make, const std::vector<std::size_t>& cuts) {
    std::vector<std::unique_ptr<Optimizer>> out;
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) out.push_back(make(ArenaSlice{cuts[i], cuts[i + 1]}));
    return out;
}

void step_all(std::vector<std::unique_ptr<Optimizer>>& opts, std::vector<float>& p, int t) {
    const auto g = randn(kArena, 100 + static_cast<std::uint64_t>(t));
    for (auto& o : opts) o->step(p.data(), g.data(), 1e-2f, 0.7f);
}

class Reshard : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / fmt::format("llmt_reshard_{}_{}", ::getpid(), GetParam());
        fs::create_directories(dir_);
        make_ = GetParam() == 0 ? Make(adamw) : Make(sgd);
    }
    void TearDown() override { fs::remove_all(dir_); }

    // Writes each optimizer's state to <dir>/<tag><i>.safetensors and opens them.
    std::vector<SafetensorsFile> save(const std::vector<std::unique_ptr<Optimizer>>& opts, const std::string& tag) {
        std::vector<SafetensorsFile> files;
        for (std::size_t i = 0; i < opts.size(); ++i) {
            const fs::path f = dir_ / fmt::format("{}{}.safetensors", tag, i);
            write_safetensors(f, opts[i]->state_tensors(), opts[i]->state_metadata());
            files.push_back(SafetensorsFile::open(f));
        }
        return files;
    }
    static std::vector<const SafetensorsFile*> ptrs(const std::vector<SafetensorsFile>& files) {
        std::vector<const SafetensorsFile*> p;
        for (const auto& f : files) p.push_back(&f);
        return p;
    }

    fs::path dir_;
    Make make_;
};

// 3 slices (cuts inside w, the padding and w2) run 3 steps and are saved; the state continues as 2 other
// slices and as the whole arena, and both equal the 3 slices continuing, bit for bit (the same fp32
// operations on the same values, only read from other files).
TEST_P(Reshard, ContinuesBitForBitOnOtherSlices) {
    auto three = sliced(make_, {0, 7, 31, kArena});
    std::vector<float> p = randn(kArena, 1);
    for (int t = 0; t < 3; ++t) step_all(three, p, t);
    const auto files = save(three, "three");

    auto two = sliced(make_, {0, 29, kArena});
    for (auto& o : two) o->load_state_shards(ptrs(files));
    auto whole = sliced(make_, {0, kArena});
    whole[0]->load_state_shards(ptrs(files));
    std::vector<float> p2 = p, p1 = p;
    for (int t = 3; t < 6; ++t) {
        step_all(three, p, t);
        step_all(two, p2, t);
        step_all(whole, p1, t);
    }
    EXPECT_EQ(std::memcmp(p.data(), p2.data(), kArena * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(p.data(), p1.data(), kArena * sizeof(float)), 0);

    // And back: the whole arena's state cut into 3 other slices.
    const auto whole_file = save(whole, "whole");
    auto again = sliced(make_, {0, 12, 40, kArena});
    for (auto& o : again) o->load_state_shards(ptrs(whole_file));
    std::vector<float> p3 = p1;
    step_all(whole, p1, 6);
    step_all(again, p3, 6);
    EXPECT_EQ(std::memcmp(p1.data(), p3.data(), kArena * sizeof(float)), 0);
}

TEST_P(Reshard, RefusesShardsThatDoNotFit) {
    auto three = sliced(make_, {0, 7, 31, kArena});
    std::vector<float> p = randn(kArena, 1);
    step_all(three, p, 0);
    const auto files = save(three, "a");
    auto whole = make_(ArenaSlice{});
    auto expect_error = [&](const std::vector<const SafetensorsFile*>& given, const std::string& words) {
        try {
            whole->load_state_shards(given);
            ADD_FAILURE() << "no error for: " << words;
        } catch (const CheckpointError& e) {
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
        }
    };
    expect_error({&files[0], &files[2]}, "no file holds arena elements [7, 31)");
    expect_error({&files[0], &files[1], &files[1], &files[2]}, "overlaps");
    // A tensor missing from one shard.
    std::vector<TensorRef> refs = three[1]->state_tensors();
    refs.erase(refs.begin());
    write_safetensors(dir_ / "cut.safetensors", refs, three[1]->state_metadata());
    const auto cut = SafetensorsFile::open(dir_ / "cut.safetensors");
    // A shard saved one step later.
    step_all(three, p, 1);
    const auto later = save(three, "b");
    expect_error({&files[0], &later[1], &files[2]}, "different saves");
    // Another arena size.
    auto other = std::make_unique<AdamW>(slots(), kArena + 5, AdamWConfig{});
    if (GetParam() == 0) {
        try {
            other->load_state_shards(ptrs(files));
            ADD_FAILURE() << "another arena size was accepted";
        } catch (const CheckpointError& e) {
            EXPECT_NE(std::string(e.what()).find("arena of 59 elements, this model's has 64"), std::string::npos)
                << e.what();
        }
    }
    // The missing tensor is named, and nothing changed (the next step equals a fresh optimizer's).
    expect_error({&files[0], &cut, &files[2]}, "missing");
    auto fresh = make_(ArenaSlice{});
    std::vector<float> pa = randn(kArena, 9), pb = pa;
    const auto g = randn(kArena, 5);
    whole->step(pa.data(), g.data(), 1e-2f);
    fresh->step(pb.data(), g.data(), 1e-2f);
    EXPECT_EQ(std::memcmp(pa.data(), pb.data(), kArena * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, Reshard, ::testing::Values(0, 1),
                         [](const auto& tp) { return tp.param == 0 ? std::string("AdamW") : std::string("Sgd"); });

}  // namespace
