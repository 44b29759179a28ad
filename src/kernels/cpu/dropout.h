// Inverted dropout (torch.nn.functional.dropout semantics: keep with probability 1-p, scale kept values
// by 1/(1-p)), with a counter-based mask: element i is kept iff hash(seed, i) >= p, so the backward
// recomputes the mask instead of storing it, and results do not depend on the thread count. The caller
// derives a distinct seed per (step, layer, site, rank). Legend: N elements.
// Grad convention (src/kernels/README.md): dinp = (activation grad); dinp may alias dout.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llmt::kernels::cpu {

// out (N) = keep_i ? inp_i / (1 - p) : 0; p in [0, 1). out may alias inp.
void dropout_forward(float* out, const float* inp, float p, uint64_t seed, size_t N);

// dinp (N) = keep_i ? dout_i / (1 - p) : 0, with the same (p, seed) as the forward.
void dropout_backward(float* dinp, const float* dout, float p, uint64_t seed, size_t N);

}  // namespace llmt::kernels::cpu
