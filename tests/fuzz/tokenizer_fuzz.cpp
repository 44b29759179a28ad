// libFuzzer target for the GPT-2 tokenizer: round trip, id range and the pre-tokenizer against a literal
// transcription of the regex (tokenizer_fuzz_body.h). Built by the `fuzz` preset (tests/fuzz/CMakeLists.txt);
// tests/data/tokenizer_fuzz_test.cpp runs the same body on 20k seeded inputs in the ordinary build.
#include "fuzz/tokenizer_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    llmt::fuzz::fuzz_tokenizer_one(data, size);
    return 0;
}
