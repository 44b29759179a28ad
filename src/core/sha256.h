// SHA-256 (FIPS 180-4) for manifests and integrity checks: hex digests of bytes and of files.
// A plain portable implementation; it hashes ~300-500 MB/s, enough for corpus manifests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace llmt {

// Incremental hasher. Not thread-safe; one instance per stream.
class Sha256 {
public:
    Sha256();
    void update(const void* data, std::size_t n);
    void update(std::string_view s) { update(s.data(), s.size()); }
    // The digest as 64 lowercase hex digits. The hasher must not be updated afterwards.
    std::string hex_digest();

private:
    void compress(const uint8_t* block);
    uint32_t h_[8];
    uint8_t buf_[64];
    std::size_t buf_len_ = 0;
    uint64_t total_bytes_ = 0;
    bool finished_ = false;
};

// Lowercase hex SHA-256 of `bytes`.
std::string sha256_hex(std::string_view bytes);

// Lowercase hex SHA-256 of a file's contents, read in 1 MiB blocks. Throws IoError naming the path.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace llmt
