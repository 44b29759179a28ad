// libFuzzer target for the JSON submit body (submit_body_fuzz_body.h), built by the `fuzz` preset;
// tests/server/submit_body_fuzz_smoke_test.cpp runs the same body on seeded mutations in the ordinary build.
#include "fuzz/submit_body_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    llmt::fuzz::fuzz_submit_body_one(data, size);
    return 0;
}
