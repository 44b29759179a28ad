// optim::Sgd unit tests: the update vs a float64 transcription of torch.optim.SGD's algorithm (momentum,
// dampening, Nesterov, L2 decay only on the decay group), plain SGD keeping no buffer, ZeRO-1 slices
// equal to the whole, state save/load through safetensors, and the error for another optimizer's state.
// PyTorch comparison: tests/reference/sgd_reference_test.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "core/safetensors.h"
#include "optim/adamw.h"
#include "optim/sgd.h"

namespace fs = std::filesystem;
using namespace llmt;
using namespace llmt::optim;

namespace {

// w (4x6, decay), b (6, no decay), 3 padding elements, ln (5, no decay), w2 (3x7, decay).
std::vector<ParamSlot> slots() {
    return {{"w", {4, 6}, 0, true}, {"b", {6}, 24, false}, {"ln", {5}, 33, false}, {"w2", {3, 7}, 38, true}};
}
constexpr std::size_t kArena = 59;
bool is_padding(std::size_t i) { return i >= 30 && i < 33; }
bool decays(std::size_t i) { return i < 24 || i >= 38; }

std::vector<float> randn(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

fs::path temp_file(const char* what) {
    return fs::temp_directory_path() / fmt::format("llmt_sgd_{}_{}.safetensors", what, ::getpid());
}

// torch.optim.SGD's algorithm in double, for 5 steps with a grad scale of 0.5 and a decaying lr.
void expect_matches_transcription(const SgdConfig& cfg) {
    Sgd opt(slots(), kArena, cfg);
    std::vector<float> p = randn(kArena, 1);
    std::vector<double> pd(p.begin(), p.end()), buf(kArena, 0);
    for (int t = 1; t <= 5; ++t) {
        std::vector<float> g = randn(kArena, 100 + t);
        const float lr = 1e-1f / t;
        opt.step(p.data(), g.data(), lr, 0.5f);
        for (std::size_t i = 0; i < kArena; ++i) {
            if (is_padding(i)) continue;
            double d = 0.5 * g[i] + (decays(i) ? cfg.weight_decay : 0.0) * pd[i];
            if (cfg.momentum != 0) {
                buf[i] = t == 1 ? d : cfg.momentum * buf[i] + (1.0 - cfg.dampening) * d;
                d = cfg.nesterov ? d + cfg.momentum * buf[i] : buf[i];
            }
            pd[i] -= lr * d;
        }
    }
    EXPECT_EQ(opt.step_count(), 5);
    for (std::size_t i = 0; i < kArena; ++i) {
        // Padding is never touched; elsewhere fp32 vs double over 5 steps of O(0.1) updates to O(1) values:
        // a few roundings of 6e-8 per step, so 1e-6 absolute, far below one step's change (~1e-2).
        if (is_padding(i)) EXPECT_EQ(p[i], static_cast<float>(randn(kArena, 1)[i])) << i;
        else EXPECT_NEAR(p[i], pd[i], 1e-6) << "element " << i;
    }
}

}  // namespace

TEST(Sgd, MomentumMatchesFloat64Transcription) { expect_matches_transcription({0.9f, 0.0f, false, 0.1f}); }
TEST(Sgd, DampeningMatchesFloat64Transcription) { expect_matches_transcription({0.8f, 0.3f, false, 0.05f}); }
TEST(Sgd, NesterovMatchesFloat64Transcription) { expect_matches_transcription({0.9f, 0.0f, true, 0.1f}); }
TEST(Sgd, PlainSgdMatchesFloat64Transcription) { expect_matches_transcription({0.0f, 0.5f, false, 0.1f}); }

TEST(Sgd, FirstStepSetsTheBufferToTheGradient) {
    // Dampening does not apply on the first step (torch clones the gradient into the buffer).
    Sgd opt({{"w", {4}, 0, false}}, 4, SgdConfig{0.9f, 0.5f, false, 0.0f});
    std::vector<float> p(4, 1.0f), g = {1.0f, -2.0f, 0.5f, 0.0f};
    opt.step(p.data(), g.data(), 0.1f);
    const auto refs = opt.state_tensors();
    ASSERT_EQ(refs.size(), 2u);
    EXPECT_EQ(refs[0].name, "w.momentum_buffer");
    const float* buf = static_cast<const float*>(refs[0].data);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(buf[i], g[static_cast<std::size_t>(i)]);
        EXPECT_EQ(p[static_cast<std::size_t>(i)], 1.0f - 0.1f * g[static_cast<std::size_t>(i)]);
    }
}

TEST(Sgd, PlainSgdKeepsNoBuffer) {
    Sgd opt(slots(), kArena, SgdConfig{0.0f, 0.0f, false, 0.0f});
    const auto specs = opt.state_specs();
    ASSERT_EQ(specs.size(), 1u);
    EXPECT_EQ(specs[0].name, "step");
}

TEST(Sgd, Zero1SlicesEqualTheWholeBitForBit) {
    SgdConfig cfg{0.9f, 0.0f, true, 0.1f};
    Sgd whole(slots(), kArena, cfg);
    std::vector<Sgd> parts;
    std::size_t cuts[] = {0, 7, 24, 31, 45, kArena};  // inside w, at a slot edge, in the padding, inside w2
    for (int i = 0; i < 5; ++i) parts.emplace_back(slots(), kArena, cfg, ArenaSlice{cuts[i], cuts[i + 1]});
    std::vector<float> p1 = randn(kArena, 7), p2 = p1;
    for (int t = 0; t < 4; ++t) {
        std::vector<float> g = randn(kArena, 50 + t);
        whole.step(p1.data(), g.data(), 3e-2f, 0.8f);
        for (auto& o : parts) o.step(p2.data(), g.data(), 3e-2f, 0.8f);
    }
    EXPECT_EQ(std::memcmp(p1.data(), p2.data(), kArena * sizeof(float)), 0);
    const auto specs = parts[0].state_specs();  // a slot cut by a boundary exports its part flat
    ASSERT_EQ(specs.size(), 2u);
    EXPECT_EQ(specs[0].name, "w.momentum_buffer");
    EXPECT_EQ(specs[0].shape, Shape{7});
}

TEST(Sgd, StateRoundTripResumesBitForBit) {
    const fs::path file = temp_file("state");
    SgdConfig cfg{0.9f, 0.1f, false, 0.1f};
    Sgd a(slots(), kArena, cfg);
    std::vector<float> pa = randn(kArena, 3);
    for (int t = 0; t < 3; ++t) a.step(pa.data(), randn(kArena, 10 + t).data(), 1e-2f);
    write_safetensors(file, a.state_tensors(), a.state_metadata());

    Sgd b(slots(), kArena, cfg);
    auto f = SafetensorsFile::open(file);
    EXPECT_EQ(f.info("w.momentum_buffer").shape, (Shape{4, 6}));
    b.load_state(f);
    EXPECT_EQ(b.step_count(), 3);
    std::vector<float> pb = pa;
    for (int t = 3; t < 6; ++t) {
        auto g = randn(kArena, 10 + t);
        a.step(pa.data(), g.data(), 1e-2f);
        b.step(pb.data(), g.data(), 1e-2f);
    }
    EXPECT_EQ(std::memcmp(pa.data(), pb.data(), kArena * sizeof(float)), 0);
    fs::remove(file);
}

TEST(Sgd, LoadingAdamWStateNamesBothOptimizers) {
    const fs::path file = temp_file("adamw");
    AdamW adamw(slots(), kArena, AdamWConfig{});
    std::vector<float> p(kArena, 1.0f), g(kArena, 1.0f);
    adamw.step(p.data(), g.data(), 1e-3f);
    write_safetensors(file, adamw.state_tensors(), adamw.state_metadata());
    Sgd sgd(slots(), kArena, SgdConfig{});
    try {
        sgd.load_state(SafetensorsFile::open(file));
        FAIL() << "adamw state loaded into sgd";
    } catch (const CheckpointError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("written by trainer.optimizer adamw and this run's trainer.optimizer is sgd"),
                  std::string::npos) << msg;
    }
    EXPECT_EQ(sgd.step_count(), 0);
    fs::remove(file);
}

TEST(Sgd, AdamWRefusesSgdStateNamingBoth) {
    const fs::path file = temp_file("sgd");
    Sgd sgd(slots(), kArena, SgdConfig{});
    std::vector<float> p(kArena, 1.0f), g(kArena, 1.0f);
    sgd.step(p.data(), g.data(), 1e-3f);
    write_safetensors(file, sgd.state_tensors(), sgd.state_metadata());
    AdamW adamw(slots(), kArena, AdamWConfig{});
    try {
        adamw.load_state(SafetensorsFile::open(file));
        FAIL() << "sgd state loaded into adamw";
    } catch (const CheckpointError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("written by trainer.optimizer sgd and this run's trainer.optimizer is adamw"),
                  std::string::npos) << msg;
    }
    EXPECT_EQ(adamw.step_count(), 0);
    fs::remove(file);
}

TEST(Sgd, LoadStateListsDifferences) {
    const fs::path file = temp_file("bad");
    Sgd a(slots(), kArena, SgdConfig{});
    std::vector<float> p(kArena, 1.0f), g(kArena, 1.0f);
    a.step(p.data(), g.data(), 1e-3f);
    write_safetensors(file, a.state_tensors(), a.state_metadata());
    auto other = slots();
    other[0].shape = {6, 4};
    Sgd b(other, kArena, SgdConfig{});
    try {
        b.load_state(SafetensorsFile::open(file));
        FAIL() << "mismatch not detected";
    } catch (const CheckpointError& e) {
        EXPECT_NE(std::string(e.what()).find("tensor 'w.momentum_buffer' has shape [4, 6], expected [6, 4]"),
                  std::string::npos) << e.what();
    }
    // Plain SGD (no buffer) from a momentum checkpoint: the buffers are unexpected.
    Sgd plain(slots(), kArena, SgdConfig{0.0f, 0.0f, false, 0.0f});
    EXPECT_THROW(plain.load_state(SafetensorsFile::open(file)), CheckpointError);
    EXPECT_EQ(b.step_count(), 0);
    fs::remove(file);
}

TEST(Sgd, RejectsNesterovWithoutMomentumOrWithDampening) {
    EXPECT_THROW(Sgd(slots(), kArena, SgdConfig{0.0f, 0.0f, true, 0.0f}), InternalError);
    EXPECT_THROW(Sgd(slots(), kArena, SgdConfig{0.9f, 0.1f, true, 0.0f}), InternalError);
    EXPECT_THROW(Sgd({{"a", {4}, 0, true}, {"b", {4}, 3, true}}, 8, SgdConfig{}), InternalError);  // overlap
}
