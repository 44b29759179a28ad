// The optimizer slots of a bare ParamStore (one per tensor, weight decay on kWeight), for the tests that drive
// a store and an optimizer without a model (zero_masters_test, zero_masters_cuda_test).
#pragma once

#include <vector>

#include "models/param_store.h"
#include "optim/param_slots.h"

namespace llmt::test {

inline std::vector<optim::ParamSlot> slots_of(const models::ParamStore& s) {
    std::vector<optim::ParamSlot> out;
    for (size_t i = 0; i < s.specs().size(); ++i)
        out.push_back({s.spec(i).name, Shape(s.spec(i).shape.begin(), s.spec(i).shape.end()),
                       s.params().entry(i).offset / sizeof(float), s.spec(i).kind == models::ParamKind::kWeight});
    return out;
}

}  // namespace llmt::test
