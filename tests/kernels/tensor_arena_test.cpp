// core/tensor.h, core/arena.h, core/cpu_features.h: layout, alignment, views, mirror, errors.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/arena.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/tensor.h"

namespace llmt {
namespace {

TEST(Tensor, ShapeAndAccess) {
    float buf[24];
    Tensor t(buf, {2, 3, 4});
    EXPECT_EQ(t.ndim, 3);
    EXPECT_EQ(t.numel(), 24);
    EXPECT_EQ(t.nbytes(), 96u);
    EXPECT_EQ(t.dim(-1), 4);
    EXPECT_EQ(t.ptr<float>(), buf);
    EXPECT_THROW(t.ptr<int32_t>(), InternalError);
    EXPECT_EQ(t.describe(), "(2, 3, 4) f32 cpu");
    EXPECT_THROW(Tensor(buf, {1, 2, 3, 4, 5}), InternalError);
    EXPECT_THROW(Tensor(buf, {-1}), InternalError);
    EXPECT_EQ(dtype_size(DType::kBF16), 2u);
    EXPECT_EQ(dtype_name(DType::kU16), "u16");
}

TEST(Arena, LayoutAlignmentViews) {
    Arena a;
    EXPECT_EQ(a.add("wte", {5, 3}), 0u);
    EXPECT_EQ(a.add("ids", {7}, DType::kI32), 1u);
    EXPECT_EQ(a.add("ln.w", {16}), 2u);
    EXPECT_THROW(a.add("wte", {1}), InternalError);
    EXPECT_THROW(a.view("wte"), InternalError);  // before allocate
    a.allocate();
    EXPECT_THROW(a.add("late", {1}), InternalError);
    EXPECT_EQ(a.entry(0).offset, 0u);
    EXPECT_EQ(a.entry(1).offset, 64u);  // 60 bytes rounded up to a cache line
    EXPECT_EQ(a.entry(2).offset, 128u);
    EXPECT_EQ(a.nbytes(), 192u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % Arena::kAlignment, 0u);
    Tensor w = a.view("wte");
    EXPECT_EQ(w.numel(), 15);
    EXPECT_EQ(w.dim(0), 5);
    for (int i = 0; i < 15; i++) EXPECT_EQ(w.ptr<float>()[i], 0.0f);  // zeroed
    Tensor ids = a.view("ids");
    EXPECT_EQ(ids.dtype, DType::kI32);
    EXPECT_EQ(static_cast<char*>(ids.data) - static_cast<char*>(a.data()), 64);
    EXPECT_THROW(a.view("nope"), InternalError);
    EXPECT_TRUE(a.contains("ln.w"));

    w.ptr<float>()[3] = 2.5f;
    Arena g = a.mirror();
    EXPECT_EQ(g.nbytes(), a.nbytes());
    EXPECT_EQ(g.entry(2).offset, a.entry(2).offset);
    EXPECT_NE(g.data(), a.data());
    EXPECT_EQ(g.view("wte").ptr<float>()[3], 0.0f);  // a mirror is a fresh zeroed buffer
}

TEST(CpuFeatures, Consistent) {
    const CpuFeatures& f = cpu_features();
    if (f.avx512f) {
        EXPECT_TRUE(f.avx2);
    }
    EXPECT_FALSE(f.describe().empty());
}

}  // namespace
}  // namespace llmt
