// ZeRO-3's sharded parameter groups (ParamStore::shard_groups) and the transformer's per-unit hooks
// (models/unit_gather.h), in one process: two models hold ranks 0 and 1's chunks of the same GPT-2, and a
// gather that copies both ranks' chunks into the unit's buffer stands in for the all-gather. A sharded
// model's loss and gradients (its chunk accumulators, joined) must equal the whole model's bit for bit:
// the same kernels read the same weights in the same order, so any difference means a unit was read while
// another unit's buffer was bound, or a gradient went to the wrong unit. Tied and untied heads, recompute
// and eval forwards are covered.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "models/gpt2.h"

namespace llmt::models {
namespace {

constexpr int kL = 3, kB = 2, kT = 16, kV = 64;

Gpt2Config tiny(bool tied, Recompute r, int world = 1, int rank = 0) {
    Gpt2Config c;
    c.n_layer = kL;
    c.n_head = 2;
    c.d_model = 32;
    c.d_ff = 128;
    c.block_size = kT;
    c.vocab_size = kV - 3;
    c.padded_vocab = kV;
    c.tie_embeddings = tied;
    c.recompute = r;
    c.shard = {world, rank};
    return c;
}

// The all-gather and reduce-scatter of two ranks in one process: a unit's buffer is both stores' chunks
// side by side; its gradient goes back chunk by chunk into each store's accumulator (no mean: one model ran).
class TwoStoreGather final : public UnitGather {
public:
    explicit TwoStoreGather(ParamStore* stores[2]) : s_{stores[0], stores[1]} {}
    void acquire(int unit, bool grads) override {
        auto& b = held_[static_cast<size_t>(unit)];
        const ParamStore::Group& g = s_[0]->groups()[static_cast<size_t>(unit)];
        if (b.w.empty()) {
            b.w.resize(2 * g.chunk);
            for (int r = 0; r < 2; ++r)
                std::memcpy(b.w.data() + static_cast<size_t>(r) * g.chunk, s_[r]->masters() + g.local, g.chunk * 4);
        }
        if (grads && b.g.empty()) b.g.assign(2 * g.chunk, 0.f);
        for (ParamStore* s : s_)
            s->bind_group(static_cast<size_t>(unit), b.w.data(), b.g.empty() ? nullptr : b.g.data());
        ++acquired;
    }
    void release(int unit) override {
        auto& b = held_[static_cast<size_t>(unit)];
        ASSERT_FALSE(b.w.empty()) << "unit " << unit << " released but not held";
        const ParamStore::Group& g = s_[0]->groups()[static_cast<size_t>(unit)];
        for (int r = 0; r < 2; ++r) {
            if (!b.g.empty()) {
                float* acc = static_cast<float*>(s_[r]->grads().data()) + g.local;
                for (size_t i = 0; i < g.chunk; ++i) acc[i] += b.g[static_cast<size_t>(r) * g.chunk + i];
            }
            s_[r]->unbind_group(static_cast<size_t>(unit));
        }
        b = {};
    }
    int acquired = 0;

private:
    struct Held {
        std::vector<float> w, g;
    };
    ParamStore* s_[2];
    Held held_[kL + 2];
};

std::vector<int32_t> ids(int salt) {
    std::vector<int32_t> v(static_cast<size_t>(kB) * kT);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>((i * 7 + static_cast<size_t>(salt)) % (kV - 3));
    return v;
}

// A gather that holds nothing: the whole model computes as a sharded one does (the final norm then leaves
// the previous unit's bias gradient to its GEMM, as under ZeRO-3), so the two agree bit for bit.
class NoGather final : public UnitGather {
public:
    void acquire(int, bool) override {}
    void release(int) override {}
};

// This rank's chunk of every group, joined: from the store's own chunk buffers (masters(), grads()), or
// cut from a whole arena's values.
std::vector<float> local_chunks(const ParamStore& s, const float* local) {
    std::vector<float> out;
    for (size_t g = 0; g < s.groups().size(); ++g) {
        const float* p = local + s.groups()[g].local;
        out.insert(out.end(), p, p + (s.chunk_last(g) - s.chunk_first(g)));
    }
    return out;
}
std::vector<float> whole_chunks(const ParamStore& s, const float* whole) {
    std::vector<float> out;
    for (size_t g = 0; g < s.groups().size(); ++g)
        out.insert(out.end(), whole + s.chunk_first(g), whole + s.chunk_last(g));
    return out;
}

void expect_sharded_equals_whole(bool tied, Recompute r) {
    Gpt2 whole(tiny(tied, r), Device::kCpu, DType::kF32);
    Gpt2 rank0(tiny(tied, r, 2, 0), Device::kCpu, DType::kF32), rank1(tiny(tied, r, 2, 1), Device::kCpu, DType::kF32);
    for (Model* m : {static_cast<Model*>(&whole), static_cast<Model*>(&rank0), static_cast<Model*>(&rank1)})
        m->init_random(7);
    ParamStore* stores[2] = {&rank0.trained(), &rank1.trained()};
    ASSERT_EQ(stores[0]->groups().size(), static_cast<size_t>(kL + 2));
    // The chunks hold the whole model's values; nothing whole is allocated.
    const auto* w = static_cast<const float*>(whole.params().data());
    size_t covered = 0;
    for (ParamStore* s : stores) {
        EXPECT_EQ(local_chunks(*s, s->masters()), whole_chunks(*s, w));
        EXPECT_FALSE(s->params().allocated());
        EXPECT_EQ(s->param_bytes(), s->grad_bytes());
        EXPECT_LE(s->param_bytes(), whole.trained().param_bytes() / 2 + 64 * (kL + 2));
        covered += local_chunks(*s, s->masters()).size();
        EXPECT_THROW(s->weight(0), InternalError) << "a unit's weights outside its gather";
    }
    EXPECT_EQ(covered, whole.trained().arena_numel()) << "the two ranks' chunks cover the arena";

    NoGather none;
    TwoStoreGather two(stores);
    whole.set_unit_gather(&none);
    rank0.set_unit_gather(&two);
    const auto x = ids(1), y = ids(2);
    const float lw = whole.forward(x.data(), y.data(), kB, kT, true);
    whole.backward();
    const float ls = rank0.forward(x.data(), y.data(), kB, kT, true);
    rank0.backward();
    EXPECT_EQ(lw, ls);
    EXPECT_GE(two.acquired, 2 * kL + 3) << "every unit gathered for the forward and again for backward";
    const auto* gw = static_cast<const float*>(whole.grads().data());
    for (ParamStore* s : stores)
        EXPECT_EQ(local_chunks(*s, static_cast<const float*>(s->grads().data())), whole_chunks(*s, gw));
    // An eval forward holds each unit only while it computes, without gradient buffers.
    EXPECT_EQ(whole.forward(x.data(), y.data(), kB, kT, false), rank0.forward(x.data(), y.data(), kB, kT, false));
    EXPECT_THROW(stores[0]->weight(0), InternalError) << "everything released after the forward";
}

TEST(ParamGroups, TiedHeadShardedEqualsWhole) { expect_sharded_equals_whole(true, Recompute::kNone); }
TEST(ParamGroups, UntiedHeadShardedEqualsWhole) { expect_sharded_equals_whole(false, Recompute::kNone); }
TEST(ParamGroups, RecomputeRegathersTheLayer) { expect_sharded_equals_whole(true, Recompute::kAll); }

TEST(ParamGroups, ChunksAreEqualAlignedAndCutAtTheGroupEnd) {
    ParamStore s;
    s.add(ParamSpec::make("a", {5, 7}, ParamInit::kNormal, ParamKind::kWeight));
    s.add(ParamSpec::make("b", {3}, ParamInit::kZeros, ParamKind::kBias));
    s.add(ParamSpec::make("c", {40}, ParamInit::kOnes, ParamKind::kNorm));
    s.layout(Device::kCpu, DType::kF32);
    s.shard_groups({0, 2}, 3, 2);
    s.allocate();
    // Group 0: a (35 floats, padded to 48) and b (3, padded to 16): 64 floats, 3 chunks of 32 (22 rounded up
    // to 16s); rank 2's chunk starts past the group's end: empty.
    EXPECT_EQ(s.groups()[0].end, 64u);
    EXPECT_EQ(s.groups()[0].chunk, 32u);
    EXPECT_EQ(s.chunk_first(0), 64u);
    EXPECT_EQ(s.chunk_last(0), 64u);
    // Group 1: c (40 floats, padded to 48): chunks of 16, rank 2's [96, 112).
    EXPECT_EQ(s.groups()[1].chunk, 16u);
    EXPECT_EQ(s.chunk_first(1), 96u);
    EXPECT_EQ(s.chunk_last(1), 112u);
    EXPECT_EQ(s.groups()[1].local, 32u);
    std::vector<float> c(40);
    for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i);
    s.write_f32(2, c.data());
    EXPECT_EQ(s.masters()[32], 32.f);  // element 96 of the arena is c[32]
    EXPECT_EQ(s.masters()[39], 39.f);
    EXPECT_EQ(s.masters()[40], 0.f);  // padding stays 0
    EXPECT_THROW(s.read_f32(2), InternalError);
}

}  // namespace
}  // namespace llmt::models
