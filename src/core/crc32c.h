// CRC-32C (Castagnoli polynomial, reflected 0x82F63B78; RFC 3720 appendix B.4): the checksum of each
// tensor in the safetensors files llmtrain writes and of state.json (docs/architecture.md "Checkpoint
// integrity"). Uses the SSE4.2 crc32 instruction when the CPU has it (three interleaved streams), a
// slicing-by-8 table otherwise; both give the same values. Thread-safe (pure functions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmt {

// The CRC-32C of `crc`'s data followed by `n` more bytes (crc = 0 starts a new checksum), so a large
// buffer can be checksummed in pieces: crc32c_extend(crc32c_extend(0, a, n), b, m) == crc of a then b.
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t n);
inline std::uint32_t crc32c(const void* data, std::size_t n) { return crc32c_extend(0, data, n); }
inline std::uint32_t crc32c(std::string_view s) { return crc32c_extend(0, s.data(), s.size()); }

// "crc32c:%08x", the form checksums take in files; parse returns false for anything else.
std::string crc32c_text(std::uint32_t crc);
bool parse_crc32c_text(std::string_view text, std::uint32_t* out);

// Whether crc32c_extend uses the SSE4.2 instruction on this CPU (for logs and benchmarks).
bool crc32c_hardware();

}  // namespace llmt
