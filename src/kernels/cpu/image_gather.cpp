#include "kernels/cpu/image_gather.h"

#include <cstddef>

namespace llmt::kernels::cpu {

void gather_images(float* out, const ImageTable& t, const ImageRef* refs, int B, const float* lut) {
    const size_t per_image = static_cast<size_t>(t.H) * t.W * t.C;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; ++b) {
        const ImageRef r = refs[b];
        float* dst = out + static_cast<size_t>(b) * per_image;
        const uint8_t* img = r.index >= 0 ? t.pixels + static_cast<size_t>(r.index) * per_image : nullptr;
        for (int y = 0; y < t.H; ++y)
            for (int x = 0; x < t.W; ++x) {
                const int sy = y + r.dy, sx = (r.flip ? t.W - 1 - x : x) + r.dx;
                const bool inside = img && sy >= 0 && sy < t.H && sx >= 0 && sx < t.W;
                float* o = dst + (static_cast<size_t>(y) * t.W + x) * t.C;
                const uint8_t* s = inside ? img + (static_cast<size_t>(sy) * t.W + sx) * t.C : nullptr;
                for (int c = 0; c < t.C; ++c) o[c] = lut[inside ? s[c] : 0];
            }
    }
}

}  // namespace llmt::kernels::cpu
