// libFuzzer entry for the safetensors reader: any input must parse cleanly (then every tensor reads)
// or throw FormatError. Build: add_executable + -fsanitize=fuzzer,address,undefined, link llmt_core.
// tests/core/safetensors_test.cpp (FuzzMutationsNeverCrash) runs a seeded version of this in ctest.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        auto f = llmt::SafetensorsFile::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
        for (const auto& name : f.names()) {
            const auto& info = f.info(name);
            std::vector<std::uint8_t> buf(info.nbytes);
            f.read_exact(name, info.dtype, info.shape, buf.data());
            if (info.dtype == llmt::StDType::kF32 || info.dtype == llmt::StDType::kBF16 ||
                info.dtype == llmt::StDType::kF16 || info.dtype == llmt::StDType::kF64) {
                std::vector<float> out(info.numel);
                f.read_f32(name, out.data(), info.shape);
            }
        }
        (void)llmt::diff_tensors(f, {{"a", llmt::StDType::kF32, {1}}}, true);
    } catch (const llmt::FormatError&) {
        // expected for malformed input
    }
    return 0;
}
