// A short deterministic fuzz of the config loader under g++ (the coverage-guided run is libFuzzer's,
// tests/fuzz/config_fuzz.cpp): mutations of the presets and of valid snippets, a fixed seed.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "core/fs.h"
#include "support/hostile_input.h"
#include "fuzz/config_fuzz_body.h"

namespace {

TEST(ConfigFuzzSmoke, MutatedPresetsNeverCrash) {
    std::vector<std::string> seeds;
    for (const auto& e : std::filesystem::directory_iterator(std::string(LLMT_SOURCE_DIR) + "/configs/presets"))
        seeds.push_back(llmt::read_file(e.path()));
    seeds.push_back("trainer: {lr: 1, betas: [0.9, 0.99]}\nrun: {name: x}\n");
    const std::string alphabet = ":-[]{}#&*!|>'\"%@`,? \n\t\\0123456789abcdefxyz.eE+~";
    std::mt19937_64 rng(20261126);
    for (int iter = 0; iter < 3000; ++iter) {
        const std::string s = llmt::testing::mutate_bytes(seeds[rng() % seeds.size()], alphabet, rng);
        SCOPED_TRACE(iter);
        llmt::fuzz::fuzz_config_one(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    }
}

}  // namespace
