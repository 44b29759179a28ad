// libFuzzer target for the config loader (built by the `fuzz` preset; scripts/run_fuzzers.sh runs it).
#include "fuzz/config_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    llmt::fuzz::fuzz_config_one(data, size);
    return 0;
}
