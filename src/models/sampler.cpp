#include "models/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace llmt::models {

Sampler::Sampler(const SamplerOptions& opts, int vocab_size) : opts_(opts), V_(vocab_size), rng_(opts.seed, 0) {
    LLMT_CHECK(std::isfinite(opts.temperature) && opts.temperature >= 0.f,
               "sampler: temperature must be a finite number >= 0 (0 = greedy), got {}", opts.temperature);
    LLMT_CHECK(opts.top_k >= 0, "sampler: top_k must be >= 0 (0 = off), got {}", opts.top_k);
    LLMT_CHECK(opts.top_p > 0.f && opts.top_p <= 1.f, "sampler: top_p must be in (0, 1] (1 = off), got {}",
               opts.top_p);
    LLMT_INTERNAL_CHECK(vocab_size > 0, "sampler: vocab_size must be positive, got {}", vocab_size);
}

int32_t Sampler::sample(const float* logits) {
    for (int i = 0; i < V_; ++i)
        LLMT_CHECK(!std::isnan(logits[i]), "sampler: logit {} is NaN (the model's weights are not finite?)", i);
    // Higher logit first, lower id on ties: one total order for argmax, top-k and the cumulative walk.
    auto before = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    const int k = opts_.top_k == 0 ? V_ : std::min(opts_.top_k, V_);
    if (opts_.temperature == 0.f || k == 1) {
        int32_t best = 0;
        for (int32_t i = 1; i < V_; ++i)
            if (logits[i] > logits[best]) best = i;
        ++counter_;  // one draw per token either way, so mixing modes never shifts later draws
        return best;
    }
    cand_.clear();  // keeps its capacity: no allocation per token
    for (int32_t i = 0; i < V_; ++i) cand_.emplace_back(logits[i], i);
    if (k < V_) {
        // The k best in one total order (sorted, so the cumulative walk below is seed-stable).
        std::nth_element(cand_.begin(), cand_.begin() + (k - 1), cand_.end(), before);
        cand_.resize(static_cast<size_t>(k));
        std::sort(cand_.begin(), cand_.end(), before);
    } else if (opts_.top_p < 1.f) {
        std::sort(cand_.begin(), cand_.end(), before);  // top-p walks the candidates most likely first
    }  // else every id, in id order: no sort needed (a 50k-id sort per token costs more than the model)
    // softmax(logit / T) over the candidates in double, max subtracted.
    const double inv_t = 1.0 / static_cast<double>(opts_.temperature);
    double mx = cand_[0].first;
    for (const auto& c : cand_) mx = std::max(mx, static_cast<double>(c.first));
    LLMT_CHECK(std::isfinite(mx), "sampler: the largest logit is {} (the model's weights are not finite?)", mx);
    double total = 0;
    std::vector<double>& w = weights_;
    w.resize(cand_.size());
    for (size_t i = 0; i < cand_.size(); ++i) total += (w[i] = std::exp((cand_[i].first - mx) * inv_t));
    if (opts_.top_p < 1.f) {
        // Keep the shortest most-likely-first prefix whose probability reaches top_p (transformers'
        // TopPLogitsWarper drops the tokens whose ascending cumulative probability is <= 1 - top_p, which is
        // the same set up to rounding at the boundary), at least one.
        const double want = static_cast<double>(opts_.top_p) * total;
        double kept = 0;
        size_t n = 0;
        while (n < cand_.size() && (n == 0 || kept < want)) kept += w[n++];
        cand_.resize(n);
        w.resize(n);
        total = kept;
    }
    const double u = rng_.uniform(counter_++) * total;
    double acc = 0;
    for (size_t i = 0; i < cand_.size(); ++i) {
        acc += w[i];
        if (u < acc) return cand_[i].second;
    }
    return cand_.back().second;  // u within rounding of total
}

}  // namespace llmt::models
