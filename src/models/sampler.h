// Next-token sampling from logits: temperature (0 = greedy argmax), top-k (0 = off), as in nanoGPT's
// sample.py, and top-p (nucleus; 1 = off) after them as transformers applies its warpers (temperature,
// then top-k, then top-p keeps the most likely tokens whose probabilities first reach p, at least one),
// with a counter-based RNG (core/rng.h) so a seed always gives the same tokens.
// Padding columns (>= vocab_size) are never considered.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/rng.h"

namespace llmt::models {

struct SamplerOptions {
    float temperature = 0.8f;  // >= 0; 0 = greedy
    int top_k = 40;            // >= 0; 0 = the whole vocabulary
    uint64_t seed = 1337;
    float top_p = 1.f;         // (0, 1]; 1 = off
};

// Not thread-safe (keeps a draw counter and scratch).
class Sampler {
public:
    // InputError for a negative or non-finite temperature, a negative top_k, top_p outside (0, 1] or
    // vocab_size <= 0.
    Sampler(const SamplerOptions& opts, int vocab_size);

    // Picks the next id from logits[0..vocab_size). Draw i uses counter i of the (seed, 0) stream, so
    // the sequence depends only on the seed and the logits. Ties break towards the lower id.
    // InputError when a logit is NaN (a diverged model) or the largest candidate is infinite.
    int32_t sample(const float* logits);

    uint64_t draws() const { return counter_; }

private:
    SamplerOptions opts_;
    int V_;
    CounterRng rng_;
    uint64_t counter_ = 0;
    std::vector<std::pair<float, int32_t>> cand_;
    std::vector<double> weights_;
};

}  // namespace llmt::models
