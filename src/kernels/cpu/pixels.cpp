#include "kernels/cpu/pixels.h"

namespace llmt::kernels::cpu {

void normalize_pixels(float* out, const int32_t* pixels, size_t n, const float* table) {
    const long count = static_cast<long>(n);
#pragma omp parallel for schedule(static) if (count > (1L << 16))
    for (long i = 0; i < count; i++) out[i] = table[pixels[i] & 255];
}

}  // namespace llmt::kernels::cpu
