// Packed examples in the CPU attention and RoPE ops (ops.h's positions): every example of a packed row gives
// the outputs and gradients it gives alone in a row of its own (no example sees another), one example filling
// the row is plain causal attention bit for bit, and the positions contract is enforced. Both CPU attention
// paths run: the blocked GEMM path (oneDNN) and the row-wise loops (LLMTRAIN_GEMM=openblas). PyTorch's
// block-diagonal causal mask is the reference in tests/reference/kernels_reference_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/knobs.h"
#include "kernels/ops.h"
#include "kernels/packed_positions.h"
#include "kernels/test_util.h"

namespace llmt::kernels {
namespace {

using test::cut_rows;
using test::pack_rows;
using test::Packing;
using test::randn;
using test::rel_err;
using test::Span;

// Tolerance of "alone equals packed". Both runs are fp32 sums over the same keys of one example; only the
// blocking differs (the packed row's GEMM tiles start at another row, and oneDNN picks its kernels by shape),
// so the order of the <= 81-term sums changes and results move by a few ulp (~1e-6 relative). A key of a
// neighbouring example leaking in moves a probability by O(1 / example length) >= 1e-2, and so the outputs.
constexpr double kTolAlone = 1e-5;

Tensor t(std::vector<float>& v, std::initializer_list<int64_t> shape) { return Tensor(v.data(), shape); }
Tensor ti(std::vector<int32_t>& v, std::initializer_list<int64_t> shape) {
    return Tensor(v.data(), shape, DType::kI32);
}

struct AttnRun {
    std::vector<float> out, lse, dqkv;
};

// attention_forward + attention_backward on (B,T) rows; positions empty: plain causal.
AttnRun run_attention(std::vector<float> qkv, std::vector<float> dout, int B, int T, int NH, int KV, int HS,
                      std::vector<int32_t> positions) {
    const int C = NH * HS, C3 = C + 2 * KV * HS;
    AttnRun r{std::vector<float>(static_cast<size_t>(B) * T * C), std::vector<float>(static_cast<size_t>(B) * NH * T),
              std::vector<float>(qkv.size())};
    const Tensor pos = positions.empty() ? Tensor() : ti(positions, {B, T});
    attention_forward(t(r.out, {B, T, C}), t(r.lse, {B, NH, T}), t(qkv, {B, T, C3}), NH, KV, pos);
    attention_backward(t(r.dqkv, {B, T, C3}), t(dout, {B, T, C}), t(qkv, {B, T, C3}), t(r.out, {B, T, C}),
                       t(r.lse, {B, NH, T}), NH, KV, {}, pos);
    return r;
}

// lse (B,NH,T) of one example (its NH rows of len entries), as (1,NH,len).
std::vector<float> cut_lse(const std::vector<float>& lse, int NH, int T, const Span& s) {
    std::vector<float> v;
    for (int h = 0; h < NH; h++) {
        const float* row = lse.data() + (static_cast<size_t>(s.b) * NH + h) * T + s.start;
        v.insert(v.end(), row, row + s.len);
    }
    return v;
}

void expect_alone(const char* what, const std::vector<float>& packed, const std::vector<float>& alone,
                  const Span& s) {
    const double e = rel_err(packed, alone);
    EXPECT_LE(e, kTolAlone) << what << " of the example at row " << s.b << ", t " << s.start << ", length " << s.len;
}

// Every example of the packing against the same example alone in a (1, len) batch.
void check_examples_alone(const std::vector<std::vector<int>>& lengths, int T, int NH, int KV, int HS, uint32_t seed) {
    const Packing pk = pack_rows(lengths, T);
    const int B = pk.B, C = NH * HS, C3 = C + 2 * KV * HS;
    const auto qkv = randn(static_cast<size_t>(B) * T * C3, seed);
    const auto dout = randn(static_cast<size_t>(B) * T * C, seed + 1);
    const AttnRun packed = run_attention(qkv, dout, B, T, NH, KV, HS, pk.positions);
    double worst = 0;
    for (const Span& s : pk.spans) {
        const AttnRun alone =
            run_attention(cut_rows(qkv, T, C3, s), cut_rows(dout, T, C, s), 1, s.len, NH, KV, HS, {});
        expect_alone("out", cut_rows(packed.out, T, C, s), alone.out, s);
        expect_alone("lse", cut_lse(packed.lse, NH, T, s), alone.lse, s);
        expect_alone("dqkv", cut_rows(packed.dqkv, T, C3, s), alone.dqkv, s);
        worst = std::max({worst, rel_err(cut_rows(packed.out, T, C, s), alone.out),
                          rel_err(cut_rows(packed.dqkv, T, C3, s), alone.dqkv)});
    }
    std::printf("  NH %d KV %d T %d, %zu examples: worst packed-vs-alone rel err %.2e (tol %.0e)\n", NH, KV, T,
                pk.spans.size(), worst, kTolAlone);
}

// Example mixes: length-1 examples first, last and in a run; examples crossing the blocked path's 64-row tiles
// (and 150 = 64 + 64 + 22, so the last tile is partial); one row of single tokens.
const std::vector<std::vector<int>> kMixes150 = {{70, 1, 1, 40, 38}, {1, 1, 1, 1, 1, 64, 81}, {150},
                                                  std::vector<int>(150, 1)};
const std::vector<std::vector<int>> kMixes37 = {{5, 1, 20, 1, 10}, {1, 36}, {36, 1}};

void check_mixes() {
    check_examples_alone(kMixes150, 150, 4, 2, 16, 11);  // grouped-query (NH 4 on KV 2)
    check_examples_alone(kMixes150, 150, 4, 4, 16, 12);  // multi-head
    check_examples_alone(kMixes37, 37, 4, 2, 8, 13);
    check_examples_alone(kMixes37, 37, 3, 1, 8, 14);     // multi-query
}

TEST(PackedAttention, ExamplesMatchAloneBlocked) { check_mixes(); }

TEST(PackedAttention, ExamplesMatchAloneRowWise) {
    const ScopedKnob gemm(Knob::kGemm, "openblas");  // no serial GEMM inside OpenMP: the row-wise loops
    check_mixes();
}

// One example filling each row: positions 0..T-1 are plain causal attention, to the bit, on both paths.
TEST(PackedAttention, OneExamplePerRowIsCausalBitForBit) {
    for (const char* gemm : {"auto", "openblas"}) {
        const ScopedKnob k(Knob::kGemm, gemm);
        const int B = 2, T = 150, NH = 4, KV = 2, HS = 16, C3 = (NH + 2 * KV) * HS;
        const Packing pk = pack_rows({{T}, {T}}, T);
        const auto qkv = randn(static_cast<size_t>(B) * T * C3, 21),
                   dout = randn(static_cast<size_t>(B) * T * NH * HS, 22);
        const AttnRun a = run_attention(qkv, dout, B, T, NH, KV, HS, pk.positions);
        const AttnRun c = run_attention(qkv, dout, B, T, NH, KV, HS, {});
        EXPECT_EQ(a.out, c.out) << gemm;
        EXPECT_EQ(a.lse, c.lse) << gemm;
        EXPECT_EQ(a.dqkv, c.dqkv) << gemm;
    }
}

// RoPE with positions: each example rotated as if it started its own row (table rows 0..len-1), bit for bit
// (the same table row and the same two products per pair), forward and backward.
TEST(PackedRope, ExamplesMatchAlone) {
    const int NH = 4, KV = 2, HS = 16, C3 = (NH + 2 * KV) * HS, T = 37, Tmax = 40;
    std::vector<float> table(static_cast<size_t>(Tmax) * HS);
    for (int p = 0; p < Tmax; p++)
        for (int i = 0; i < HS / 2; i++) {
            const double a = p * std::pow(10000.0, -2.0 * i / HS);
            table[static_cast<size_t>(p) * HS + i] = static_cast<float>(std::cos(a));
            table[static_cast<size_t>(p) * HS + HS / 2 + i] = static_cast<float>(std::sin(a));
        }
    Packing pk = pack_rows(kMixes37, T);
    const int B = pk.B;
    const auto x0 = randn(static_cast<size_t>(B) * T * C3, 31);
    auto fwd = x0, bwd = x0;
    rope_forward(t(fwd, {B, T, C3}), t(table, {Tmax, HS}), NH, KV, 0, ti(pk.positions, {B, T}));
    rope_backward(t(bwd, {B, T, C3}), t(table, {Tmax, HS}), NH, KV, ti(pk.positions, {B, T}));
    for (const Span& s : pk.spans) {
        auto f1 = cut_rows(x0, T, C3, s), b1 = f1;
        rope_forward(t(f1, {1, s.len, C3}), t(table, {Tmax, HS}), NH, KV);
        rope_backward(t(b1, {1, s.len, C3}), t(table, {Tmax, HS}), NH, KV);
        EXPECT_EQ(cut_rows(fwd, T, C3, s), f1) << "rope_forward, example at row " << s.b << " t " << s.start;
        EXPECT_EQ(cut_rows(bwd, T, C3, s), b1) << "rope_backward, example at row " << s.b << " t " << s.start;
    }
}

// The contract: each row starts at 0 and counts up by one inside an example; (B,T) i32 on the op's device.
TEST(PackedAttention, RejectsPositionsOutsideTheContract) {
    const int B = 1, T = 4, NH = 2, KV = 1, HS = 4, C = NH * HS, C3 = C + 2 * KV * HS;
    auto qkv = randn(B * T * C3, 41);
    std::vector<float> out(B * T * C), lse(B * NH * T);
    auto fwd = [&](std::vector<int32_t> pos) {
        attention_forward(t(out, {B, T, C}), t(lse, {B, NH, T}), t(qkv, {B, T, C3}), NH, KV, ti(pos, {B, T}));
    };
    EXPECT_NO_THROW(fwd({0, 1, 0, 1}));
    EXPECT_NO_THROW(fwd({0, 0, 0, 0}));
    for (const auto& bad :
         std::vector<std::vector<int32_t>>{{1, 2, 3, 4}, {0, 1, 3, 4}, {0, 1, 1, 2}, {0, -1, 0, 1}}) {
        try {
            fwd(bad);
            ADD_FAILURE() << "positions " << bad[0] << bad[1] << bad[2] << bad[3] << " were accepted";
        } catch (const InternalError& e) {
            EXPECT_NE(std::string(e.what()).find("positions["), std::string::npos) << e.what();
        }
    }
    std::vector<int32_t> short_pos = {0, 1, 2};
    EXPECT_THROW(attention_forward(t(out, {B, T, C}), t(lse, {B, NH, T}), t(qkv, {B, T, C3}), NH, KV,
                                   ti(short_pos, {B, 3})),
                 InternalError);
    std::vector<float> fpos = {0, 1, 2, 3};
    EXPECT_THROW(
        attention_forward(t(out, {B, T, C}), t(lse, {B, NH, T}), t(qkv, {B, T, C3}), NH, KV, t(fpos, {B, T})),
        InternalError);
    std::vector<float> table(static_cast<size_t>(8) * HS, 0.5f);
    std::vector<int32_t> pos = {0, 1, 0, 1};
    EXPECT_THROW(rope_forward(t(qkv, {B, T, C3}), t(table, {8, HS}), NH, KV, 2, ti(pos, {B, T})), InternalError)
        << "pos0 with positions";
}

}  // namespace
}  // namespace llmt::kernels
