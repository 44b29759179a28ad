// libFuzzer entry for the checkpoint loader's parsing: state.json (its checksum, "step",
// every typed trainer field) and a safetensors file with checksum metadata (per-tensor CRC-32C and
// finiteness). Input: 2 bytes little-endian length L, L bytes of state.json, then the safetensors
// bytes. Anything may be refused with InputError (FormatError, CheckpointError); any other exception
// or a crash is a finding. Seeds: tests/fuzz/corpus/checkpoint/.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/safetensors.h"
#include "core/safetensors_integrity.h"
#include "train/checkpoint.h"
#include "train/train_state.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const std::size_t state_len = std::min<std::size_t>(size - 2, data[0] | (std::size_t{data[1]} << 8));
    const std::string state_text(reinterpret_cast<const char*>(data) + 2, state_len);
    const std::string tensors(reinterpret_cast<const char*>(data) + 2 + state_len, size - 2 - state_len);
    bool checksummed = false;
    try {
        const auto state = llmt::train::parse_state_json(state_text, "fuzz/state.json", &checksummed);
        (void)llmt::train::parse_train_state(state, "fuzz/state.json");
    } catch (const llmt::InputError&) {
        // expected for malformed input
    }
    try {
        const auto file = llmt::SafetensorsFile::from_bytes(tensors, "fuzz/model.safetensors");
        (void)llmt::has_checksums(file);
        llmt::verify_tensors(file, checksummed ? llmt::Checksums::kRequired : llmt::Checksums::kIfPresent);
    } catch (const llmt::InputError&) {
        // expected for malformed input
    }
    return 0;
}
