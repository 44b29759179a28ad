// Counter-based random numbers (SplitMix64 over (seed, stream, counter)): the value at a given counter
// does not depend on how many threads drew before it, so initialisation and dropout masks are the same
// for every thread count and every rank layout. Not cryptographic.
#pragma once

#include <cmath>
#include <cstdint>

namespace llmt {

inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A stream of numbers identified by (seed, stream id). Thread safety: const methods only; copyable.
class CounterRng {
public:
    CounterRng(uint64_t seed, uint64_t stream) : key_(splitmix64(seed ^ splitmix64(stream + 0x632BE59BD9B4E019ull))) {}

    uint64_t bits(uint64_t counter) const { return splitmix64(key_ ^ splitmix64(counter)); }
    // Uniform in (0, 1): 53 random bits, never 0.
    double uniform(uint64_t counter) const { return (static_cast<double>(bits(counter) >> 11) + 0.5) * 0x1.0p-53; }
    // Standard normal (Box-Muller over counters 2i, 2i+1).
    double normal(uint64_t i) const {
        double u1 = uniform(2 * i), u2 = uniform(2 * i + 1);
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }

private:
    uint64_t key_;
};

}  // namespace llmt
