// The tokenizer fuzz body (tests/fuzz/tokenizer_fuzz_body.h) on 20,000 seeded inputs, so the ordinary
// build exercises it under g++: random bytes, and random strings over the characters where the
// pre-tokenizers have branches (spaces of every kind, apostrophes, contractions, digits, letters, marks).
// A failure aborts with the input in hex on stderr.
#include <gtest/gtest.h>

#include <random>

#include "fuzz/tokenizer_fuzz_body.h"

namespace llmt::fuzz {
namespace {

TEST(TokenizerFuzz, SeededInputs) {
    const std::vector<std::string> atoms = {" ", " ", "  ", "\t", "\n", "\r\n", "\xC2\x85", "\xC2\xA0", "\xE3\x80\x80",
                                            "\xEF\xBB\xBF", "'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S",
                                            "a", "Z", "word", "\xC3\xA9", "\xE6\x9D\xB1", "7", "42", "\xD9\xA3",
                                            "\xE2\x85\xA7", "!", "...", "\xCC\x81", "\xF0\x9F\x99\x82", "\xE2\x80\x8D",
                                            "<|endoftext|>", "<|", "\xFF", "\x80", "\xE2\x82", "\x00",
                                            // Llama 3's branches: case-folded contractions, CR/LF runs, digit runs.
                                            "'LL", "'Re", "'\xC5\xBF", "\r", "\n\n", " \n", "1234", "(", "<|eot_id|>"};
    const uint64_t seed = 424242;
    std::mt19937_64 rng(seed);
    std::string input;
    for (int i = 0; i < 20000; ++i) {
        input.clear();
        const std::size_t n = rng() % (i % 50 == 0 ? 2000 : 40);
        if (i % 4 == 0) {
            for (std::size_t k = 0; k < n; ++k) input.push_back(static_cast<char>(rng()));
        } else {
            for (std::size_t k = 0; k < n; ++k) input += atoms[rng() % atoms.size()];
        }
        SCOPED_TRACE("seed " + std::to_string(seed) + " iteration " + std::to_string(i));
        fuzz_tokenizer_one(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    }
}

}  // namespace
}  // namespace llmt::fuzz
