// Rotary position embeddings (Su et al. 2021) as Hugging Face computes them for LLaMA
// (transformers' modeling_rope_utils: the default inverse frequencies and Llama 3's "llama3" rescaling):
// the table of cos/sin per position that kernels::rope_forward applies in the rotate-half convention.
#pragma once

#include <string>
#include <vector>

namespace llmt::models {

// model.rope_scaling. kind "none": theta^(-2i/d) as is; "llama3": long wavelengths divided by `factor`,
// short ones kept, a smooth blend between (Llama 3.1/3.2's context extension).
struct RopeScaling {
    std::string kind = "none";
    double factor = 8.0;
    double low_freq_factor = 1.0, high_freq_factor = 4.0;
    int original_max_position_embeddings = 8192;
};

// The head_dim/2 inverse frequencies, in fp32 as transformers computes them.
std::vector<float> rope_inv_freq(int head_dim, double theta, const RopeScaling& scaling);

// (T, head_dim) fp32: row t = cos(t * inv_freq[0..half)) then sin(the same angles), with the angle
// rounded to fp32 as transformers forms it (fp32 position times fp32 frequency).
std::vector<float> rope_table(int T, int head_dim, double theta, const RopeScaling& scaling);

}  // namespace llmt::models
