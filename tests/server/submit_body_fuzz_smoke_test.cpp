// A short deterministic fuzz of the submit body under g++ (the coverage-guided run is libFuzzer's,
// tests/fuzz/submit_body_fuzz.cpp): byte mutations of the seeds in tests/fuzz/corpus/submit_body and
// of hostile shapes (deep nesting, overflowing numbers, duplicate keys), a fixed seed.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "core/fs.h"
#include "support/hostile_input.h"
#include "fuzz/submit_body_fuzz_body.h"

namespace {

TEST(SubmitBodyFuzzSmoke, MutatedBodiesNeverCrash) {
    std::vector<std::string> seeds;
    for (const auto& e :
         std::filesystem::directory_iterator(std::string(LLMT_SOURCE_DIR) + "/tests/fuzz/corpus/submit_body"))
        seeds.push_back(llmt::read_file(e.path()));
    ASSERT_FALSE(seeds.empty());
    seeds.push_back("{\"name\": \"x\", \"config\": " + std::string(5000, '[') + "}");
    const std::string alphabet = "[]{}\":,-+.eE0123456789 \n\\tfnul&*!|";
    std::mt19937_64 rng(20261127);
    for (int iter = 0; iter < 3000; ++iter) {
        const std::string s = llmt::testing::mutate_bytes(seeds[rng() % seeds.size()], alphabet, rng);
        SCOPED_TRACE(iter);
        llmt::fuzz::fuzz_submit_body_one(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    }
}

}  // namespace
