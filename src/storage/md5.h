// MD5 (RFC 1321), only to check what an S3-compatible store received: S3 returns the MD5 of a
// single-part object or of each uploaded part as its ETag, and accepts Content-MD5. Not for security.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmt::storage {

// Incremental hasher. Not thread-safe; one instance per stream.
class Md5 {
public:
    Md5();
    void update(const void* data, std::size_t n);
    void update(std::string_view s) { update(s.data(), s.size()); }
    // The 16-byte digest. The hasher must not be updated afterwards.
    std::array<uint8_t, 16> digest();

private:
    void compress(const uint8_t* block);
    uint32_t h_[4];
    uint8_t buf_[64];
    std::size_t buf_len_ = 0;
    uint64_t total_bytes_ = 0;
};

std::array<uint8_t, 16> md5(std::string_view bytes);
std::string md5_hex(std::string_view bytes);
// Lowercase hex / standard base64 of raw bytes.
std::string to_hex(const uint8_t* bytes, std::size_t n);
std::string to_base64(const uint8_t* bytes, std::size_t n);

}  // namespace llmt::storage
