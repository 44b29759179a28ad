#include "models/rope.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "core/check.h"

namespace llmt::models {

std::vector<float> rope_inv_freq(int head_dim, double theta, const RopeScaling& s) {
    LLMT_CHECK(head_dim > 0 && head_dim % 2 == 0, "model.head_dim: RoPE needs an even head size, got {}", head_dim);
    LLMT_CHECK(theta > 0, "model.rope_theta: must be > 0, got {}", theta);
    const int half = head_dim / 2;
    std::vector<float> inv(static_cast<size_t>(half));
    for (int i = 0; i < half; ++i) {
        const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
        inv[static_cast<size_t>(i)] =
            1.0f / static_cast<float>(
                       std::pow(static_cast<double>(static_cast<float>(theta)), static_cast<double>(exponent)));
    }
    if (s.kind == "none") return inv;
    LLMT_CHECK(s.kind == "llama3", "model.rope_scaling.type: expected none or llama3, found '{}'", s.kind);
    LLMT_CHECK(s.factor > 0 && s.low_freq_factor > 0 && s.high_freq_factor > s.low_freq_factor &&
                   s.original_max_position_embeddings > 0,
               "model.rope_scaling: llama3 needs factor > 0, 0 < low_freq_factor < high_freq_factor and "
               "original_max_position_embeddings > 0 (factor {}, low {}, high {}, original {})",
               s.factor, s.low_freq_factor, s.high_freq_factor, s.original_max_position_embeddings);
    // Wavelengths longer than the original context / low_freq_factor are stretched by `factor`, shorter
    // than context / high_freq_factor kept, and those between blended linearly in context / wavelength.
    const double old_ctx = s.original_max_position_embeddings;
    const double low_wavelen = old_ctx / s.low_freq_factor, high_wavelen = old_ctx / s.high_freq_factor;
    for (float& f : inv) {
        const double wavelen = 2 * std::numbers::pi / f;
        if (wavelen > low_wavelen) {
            f = static_cast<float>(f / s.factor);
        } else if (wavelen >= high_wavelen) {
            const double smooth = (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
            f = static_cast<float>((1 - smooth) * f / s.factor + smooth * f);
        }
    }
    return inv;
}

std::vector<float> rope_table(int T, int head_dim, double theta, const RopeScaling& scaling) {
    const std::vector<float> inv = rope_inv_freq(head_dim, theta, scaling);
    const int half = head_dim / 2;
    std::vector<float> table(static_cast<size_t>(T) * head_dim);
    for (int t = 0; t < T; ++t) {
        float* row = table.data() + static_cast<size_t>(t) * head_dim;
        for (int i = 0; i < half; ++i) {
            const float angle = static_cast<float>(t) * inv[static_cast<size_t>(i)];
            row[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
            row[half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
        }
    }
    return table;
}

}  // namespace llmt::models
