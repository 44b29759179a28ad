// The error measures of the tests that compare a whole tensor (a loss row, logits, a gradient) with its
// reference, in double; each refuses two empty inputs or inputs of different sizes (support/compare.h).
// Got and Want: std::vector or std::span of any arithmetic type.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "support/compare.h"

namespace llmt::support {

// ||got - want|| / ||want||. A reference of zeros gives the absolute norm ||got||.
template <class Got, class Want>
double rel_l2(const Got& got, const Want& want) {
    if (!expect_comparable(got, want, "rel_l2")) return not_comparable();
    double num = 0, den = 0;
    for (std::size_t i = 0; i < std::size(got); ++i) {
        const double w = static_cast<double>(want[i]), d = static_cast<double>(got[i]) - w;
        num += d * d;
        den += w * w;
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// max |got - want| / max |want|: the error relative to the reference's scale, robust where it crosses zero.
template <class Got, class Want>
double rel_err(const Got& got, const Want& want) {
    if (!expect_comparable(got, want, "rel_err")) return not_comparable();
    double num = 0, den = 1e-30;
    for (std::size_t i = 0; i < std::size(got); ++i) {
        const double w = static_cast<double>(want[i]);
        num = std::max(num, std::fabs(static_cast<double>(got[i]) - w));
        den = std::max(den, std::fabs(w));
    }
    return num / den;
}

}  // namespace llmt::support
