// trainer.recompute on the CPU (models/gpt2.h Recompute): gelu and all give the same losses and gradients
// as none, bit for bit, over a few SGD steps of a tiny GPT-2, and shrink the activation arena by exactly
// the buffers they stop keeping.
// Exact equality is the right tolerance: recomputation runs the same kernels on the same inputs in the
// same order as the forward (the CPU kernels are deterministic), and backward then reads the same bits,
// so any difference at all means a buffer was read before it was recomputed or from the wrong layer.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "models/gpt2.h"
#include "support/compare.h"

namespace llmt::models {
namespace {

constexpr int kL = 3, kNH = 2, kC = 32, kF = 4 * kC, kBlock = 16, kV = 64;
constexpr int kB = 2, kT = 16;

Gpt2Config tiny(Recompute r, float dropout) {
    Gpt2Config c;
    c.n_layer = kL;
    c.n_head = kNH;
    c.d_model = kC;
    c.d_ff = kF;
    c.block_size = kBlock;
    c.vocab_size = kV;
    c.padded_vocab = kV;
    c.dropout = dropout;
    c.recompute = r;
    return c;
}

// Losses of `steps` SGD steps (lr 0.1 on the raw gradient, so later steps see other weights) and the
// gradient arena of the last one.
struct Trace {
    std::vector<float> losses;
    std::vector<float> grads;
    std::vector<float> params;
};

Trace run(Recompute r, float dropout, int steps) {
    Gpt2 m(tiny(r, dropout));
    m.init_random(42);
    std::vector<int32_t> x(kB * kT), y(kB * kT);
    Trace tr;
    float* p = static_cast<float*>(m.params().data());
    const float* g = static_cast<const float*>(m.grads().data());
    const size_t n = m.params().nbytes() / sizeof(float);
    for (int s = 0; s < steps; ++s) {
        for (int i = 0; i < kB * kT; ++i) {
            x[i] = (i * 7 + s * 3) % kV;
            y[i] = (i * 5 + s + 1) % kV;
        }
        m.zero_grad();
        m.set_dropout_seed(1000 + static_cast<uint64_t>(s));
        tr.losses.push_back(m.forward(x.data(), y.data(), kB, kT, /*train=*/true));
        m.backward();
        for (size_t i = 0; i < n; ++i) p[i] -= 0.1f * g[i];
    }
    tr.grads.assign(g, g + n);
    tr.params.assign(p, p + n);
    return tr;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return support::expect_comparable(a, b, "same_bits") &&
           std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_bitwise_equal(float dropout) {
    const Trace none = run(Recompute::kNone, dropout, 3);
    for (Recompute r : {Recompute::kMlp, Recompute::kAll}) {
        SCOPED_TRACE(r == Recompute::kMlp ? "recompute gelu" : "recompute all");
        const Trace t = run(r, dropout, 3);
        ASSERT_EQ(t.losses.size(), none.losses.size());
        for (size_t s = 0; s < t.losses.size(); ++s) EXPECT_EQ(t.losses[s], none.losses[s]) << "loss of step " << s;
        EXPECT_TRUE(same_bits(t.grads, none.grads)) << "gradients of the last step differ";
        EXPECT_TRUE(same_bits(t.params, none.params)) << "weights after 3 steps differ";
    }
}

TEST(Gpt2Recompute, GeluAndAllMatchNoneBitwise) { expect_bitwise_equal(0.f); }

// With dropout the block keeps its projections apart (attproj, fcproj) and the re-run block must draw
// the same masks (they are stateless in the seed).
TEST(Gpt2Recompute, GeluAndAllMatchNoneBitwiseWithDropout) { expect_bitwise_equal(0.1f); }

// The arena shrinks by exactly what recompute does not keep per layer (every view is 64-byte aligned and these
// sizes are multiples of 64 bytes, so there is no padding to account for).
TEST(Gpt2Recompute, ActivationArenaShrinksByTheUnkeptBuffers) {
    const size_t BT = kB * kT, f = sizeof(float);
    const size_t none = Gpt2(tiny(Recompute::kNone, 0.f)).memory_plan(kB, kT).activations;
    const size_t gelu = Gpt2(tiny(Recompute::kMlp, 0.f)).memory_plan(kB, kT).activations;
    const size_t all = Gpt2(tiny(Recompute::kAll, 0.f)).memory_plan(kB, kT).activations;
    // gelu: L per-layer GELU outputs (BT x F) become one shared buffer.
    EXPECT_EQ(none - gelu, (kL - 1) * BT * kF * f);
    // all: of a layer's ln1 (C), 2 stats (1 each), qkv (3C), atty (C), lse (NH), residual2 (C), ln2 (C),
    // 2 stats, fch (F), fch_gelu (F) and residual3 (C), only residual3 stays per layer; the rest is one
    // shared block: (L - 1) x BT x (7C + 2F + 4 + NH) floats fewer.
    EXPECT_EQ(none - all, (kL - 1) * BT * (7 * kC + 2 * kF + 4 + kNH) * f);
}

TEST(Gpt2Recompute, NamesParseAndUnknownIsRefusedNamingTheKey) {
    EXPECT_EQ(recompute_from_name("none"), Recompute::kNone);
    EXPECT_EQ(recompute_from_name("gelu"), Recompute::kMlp);
    EXPECT_EQ(recompute_from_name("all"), Recompute::kAll);
    try {
        recompute_from_name("some");
        FAIL() << "expected InputError";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("trainer.recompute"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace llmt::models
