// Helpers shared by the kernel tests: seeded random tensors, error norms, a finite-difference gradient
// checker (central differences in fp64).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "support/compare.h"

namespace llmt::kernels::test {

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

inline std::vector<int32_t> randint(size_t n, int32_t hi, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> d(0, hi - 1);
    std::vector<int32_t> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

template <typename To, typename From>
std::vector<To> cast(const std::vector<From>& v) {
    return std::vector<To>(v.begin(), v.end());
}

// max |a - b| / max |b|: the error relative to the reference's scale (robust where b crosses zero).
template <typename A, typename B>
double rel_err(const std::vector<A>& a, const std::vector<B>& b) {
    if (!support::expect_comparable(a, b, "rel_err")) return support::not_comparable();
    double num = 0.0, den = 1e-30;
    for (size_t i = 0; i < a.size(); i++) {
        num = std::max(num, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
        den = std::max(den, std::fabs(static_cast<double>(b[i])));
    }
    return num / den;
}

// Checks `analytic` = d loss / d x by central differences of loss() (fp64) at x. Perturbs x in place
// and restores it. Returns the error relative to max |analytic|.
inline double fd_check(std::vector<double>& x, const std::vector<double>& analytic,
                       const std::function<double()>& loss, double h = 1e-6) {
    std::vector<double> numeric(x.size());
    for (size_t i = 0; i < x.size(); i++) {
        const double x0 = x[i];
        x[i] = x0 + h;
        const double lp = loss();
        x[i] = x0 - h;
        const double lm = loss();
        x[i] = x0;
        numeric[i] = (lp - lm) / (2 * h);
    }
    return rel_err(analytic, numeric);
}

// sum_i y[i] * w[i]: a scalar loss whose gradient w.r.t. y is w.
inline double dot(const std::vector<double>& y, const std::vector<double>& w) {
    double s = 0.0;
    for (size_t i = 0; i < y.size(); i++) s += y[i] * w[i];
    return s;
}

}  // namespace llmt::kernels::test
