// ||got - want|| / ||want|| in double: the error measure of the tests that compare a whole tensor (a
// loss row, a gradient) with its reference. A reference of zeros gives the absolute norm ||got||.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "support/compare.h"

namespace llmt::support {

template <class A, class B>
double rel_l2(const std::vector<A>& got, const std::vector<B>& want) {
    if (!expect_comparable(got, want, "rel_l2")) return not_comparable();
    double num = 0, den = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double w = static_cast<double>(want[i]), d = static_cast<double>(got[i]) - w;
        num += d * d;
        den += w * w;
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace llmt::support
