// The shared start of every test helper that compares two sequences (losses, ids, tensors): the inputs
// must be comparable, i.e. not both empty and of one size. A helper that loops over pairs of elements
// passes on two empty inputs (a run that logged nothing, a kernel that wrote nothing), so each one calls
// these first; tests/support/compare_test.cpp scans tests/ for comparison helpers that do not.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <limits>
#include <string_view>

namespace llmt::support {

// Success when got and want hold the same number of elements and not zero; the failure says which.
template <class A, class B>
::testing::AssertionResult comparable(const A& got, const B& want) {
    const std::size_t n = std::size(got), m = std::size(want);
    if (n == 0 && m == 0) return ::testing::AssertionFailure() << "both sequences are empty: nothing to compare";
    if (n != m) return ::testing::AssertionFailure() << "sizes differ: " << n << " vs " << m << " elements";
    return ::testing::AssertionSuccess() << n << " elements each";
}

// comparable() as a non-fatal failure naming `what`; returns whether the comparison may go on. For helpers
// that return a value (an error measure): `if (!expect_comparable(a, b, "x")) return not_comparable();`.
template <class A, class B>
bool expect_comparable(const A& got, const B& want, std::string_view what) {
    const ::testing::AssertionResult r = comparable(got, want);
    EXPECT_TRUE(r) << what;
    return static_cast<bool>(r);
}

// What an error measure returns for inputs that cannot be compared: larger than any tolerance.
inline double not_comparable() { return std::numeric_limits<double>::infinity(); }

}  // namespace llmt::support
