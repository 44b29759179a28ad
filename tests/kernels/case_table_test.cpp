// The kernel case table's CPU side (case_table.h): every row marked kF64 runs the CPU fp32 op against the op's float64
// reference on fresh random inputs (seed printed). `case_table_test --perf` times the CPU op of each row.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kernels/case_runner.h"

namespace llmt::kernels::cases {
namespace {

class CpuVsFloat64 : public ::testing::TestWithParam<size_t> {};

TEST_P(CpuVsFloat64, MatchesReference) {
    check_row(GetParam(), kF64);
}

INSTANTIATE_TEST_SUITE_P(CaseTable, CpuVsFloat64, ::testing::ValuesIn(rows_of(kF64)),
                         [](const ::testing::TestParamInfo<size_t>& p) { return test_name(p.param); });

// The table itself: every row names a known op whose builder accepts its shapes, runs somewhere, and every op with a
// float64 reference has at least one kF64 row (so the CPU side of each op runs in `make test`).
TEST(CaseTable, RowsAreWellFormed) {
    std::set<std::string> with_f64_rows;
    for (const Case& c : kernel_cases()) {
        SCOPED_TRACE(describe(c));
        EXPECT_NE(c.modes, 0u);
        const Call k = op_def(c.op).build(c);
        EXPECT_FALSE(k.stages.empty());
        if (c.modes & kF64) {
            EXPECT_TRUE(static_cast<bool>(k.f64)) << "kF64 row of an op without a float64 reference";
            with_f64_rows.insert(c.op);
        }
        if (*c.unordered) {
            EXPECT_TRUE(c.flags & kSameBits) << "unordered applies to kSameBits rows";
        }
    }
    for (const OpDef& d : op_defs()) {
        bool has_row = false, has_f64 = false;
        for (const Case& c : kernel_cases()) {
            if (std::string(c.op) != d.name) continue;
            has_row = true;
            has_f64 = has_f64 || static_cast<bool>(d.build(c).f64);
        }
        EXPECT_TRUE(has_row) << d.name << " has no row";
        if (has_f64) {
            EXPECT_TRUE(with_f64_rows.count(d.name)) << d.name << " has a float64 reference but no kF64 row";
        }
    }
}

}  // namespace
}  // namespace llmt::kernels::cases

int main(int argc, char** argv) {
    return llmt::kernels::cases::case_table_main(argc, argv, llmt::kernels::cases::kF64);
}
