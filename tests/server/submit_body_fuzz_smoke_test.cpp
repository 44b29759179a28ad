// A short deterministic fuzz of the submit body under g++ (the coverage-guided run is libFuzzer's,
// tests/fuzz/submit_body_fuzz.cpp): byte mutations of the seeds in tests/fuzz/corpus/submit_body and
// of hostile shapes (deep nesting, overflowing numbers, duplicate keys), a fixed seed.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "core/fs.h"
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
        std::string s = seeds[rng() % seeds.size()];
        const int edits = 1 + static_cast<int>(rng() % 8);
        for (int k = 0; k < edits && !s.empty(); ++k) {
            const std::size_t pos = rng() % s.size();
            switch (rng() % 4) {
                case 0: s[pos] = alphabet[rng() % alphabet.size()]; break;
                case 1: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
                case 2: s.erase(pos, 1 + rng() % 16); break;
                default: s[pos] = static_cast<char>(rng() & 0xFF); break;
            }
        }
        SCOPED_TRACE(iter);
        llmt::fuzz::fuzz_submit_body_one(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    }
}

}  // namespace
