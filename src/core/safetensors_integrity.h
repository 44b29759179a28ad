// Integrity of safetensors files: a CRC-32C per tensor recorded in the header's "__metadata__" (string
// -> string, so Hugging Face `safetensors` and `transformers` load the files unchanged) under
// "llmtrain.crc32c.<tensor name>" = "crc32c:%08x" of the tensor's bytes, written by write_safetensors
// and checked by verify_tensors together with finiteness of every floating-point value.
// docs/architecture.md "Checkpoint integrity".
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace llmt {

class SafetensorsFile;
struct TensorRef;

inline constexpr std::string_view kChecksumKeyPrefix = "llmtrain.crc32c.";
std::string checksum_key(std::string_view tensor_name);

// `metadata` plus one checksum entry per tensor (replacing any with the same key). Preconditions as
// write_safetensors (data of numel x dtype-size bytes).
std::map<std::string, std::string> with_checksums(const std::vector<TensorRef>& tensors,
                                                  std::map<std::string, std::string> metadata);

// Whether the file carries at least one checksum entry.
bool has_checksums(const SafetensorsFile& file);

enum class Checksums {
    kIfPresent,  // check the tensors that have one (files from elsewhere: init_from, Hugging Face)
    kRequired,   // every tensor must have one (our checkpoints: a missing entry means a damaged header)
};

// Reads every tensor once: compares its CRC-32C with the recorded one and refuses NaN or infinity in
// F64/F32/BF16/F16/F8 tensors. Throws FormatError naming the file and the tensor (and the first bad
// index, or the recorded and computed checksums); also for a checksum entry that is malformed or
// names no tensor. Thread-safe for distinct files.
void verify_tensors(const SafetensorsFile& file, Checksums policy);

}  // namespace llmt
