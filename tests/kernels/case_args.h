// Short constructors of a case's tensors (case_table.h), for the op builders of case_ops_*.cpp.
#pragma once

#include <string>
#include <vector>

#include "kernels/case_table.h"

namespace llmt::kernels::cases {

using Shape = std::vector<int64_t>;

inline Arg input(std::string name, Shape shape, float scale = 1.0f, Kind kind = Kind::kAct) {
    Arg a{std::move(name), std::move(shape)};
    a.kind = kind;
    a.scale = scale;
    return a;
}
inline Arg ids(std::string name, Shape shape, int32_t hi) {
    Arg a{std::move(name), std::move(shape)};
    a.kind = Kind::kI32;
    a.hi = hi;
    return a;
}
inline Arg output(std::string name, Shape shape, Tol tol, Kind kind = Kind::kAct) {
    Arg a{std::move(name), std::move(shape)};
    a.kind = kind;
    a.role = Role::kOut;
    a.tol = tol;
    return a;
}
// Updated in place from a random start (+= gradients, in-place ops, optimizer state).
inline Arg inout(std::string name, Shape shape, Tol tol, Kind kind = Kind::kAct, float scale = 1.0f) {
    Arg a{std::move(name), std::move(shape)};
    a.kind = kind;
    a.role = Role::kInOut;
    a.tol = tol;
    a.scale = scale;
    return a;
}
inline Arg table(std::string name, Shape shape, std::vector<float> values) {
    Arg a{std::move(name), std::move(shape)};
    a.kind = Kind::kF32;
    a.values = std::move(values);
    return a;
}

// A float64 result computed with "=" added onto the reference's start values (the ops' "+=").
inline void add_into(double* acc, const std::vector<double>& v) {
    for (size_t i = 0; i < v.size(); i++) acc[i] += v[i];
}

}  // namespace llmt::kernels::cases
