// Files to and from object storage: uploads in one PUT up to `part_bytes`, multipart above it (parts of
// part_bytes, each acknowledged and checked before the next; an upload that fails is aborted so the
// store drops its parts); downloads as ranged GETs of part_bytes into a temp file renamed into place
// once the size matches the object's. Memory: one part at a time. docs/object_storage.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>

#include "storage/s3_uri.h"

namespace llmt::storage {

class S3Client;

inline constexpr std::uint64_t kDefaultPartBytes = 64ull << 20;

struct TransferOptions {
    std::uint64_t part_bytes = kDefaultPartBytes;
    // Called after each acknowledged part of a multipart upload (1-based number, count). Tests use it.
    std::function<void(int part, int parts)> on_part;
};

// Returns the number of parts (1 for a single PUT). Throws IoError naming the file when it cannot be
// read, StorageError (s3_client.h) for the store.
int upload_file(S3Client& client, const std::filesystem::path& file, const S3Uri& dest,
                const TransferOptions& opts = {});
// Creates dest's parent directories. Throws StorageError (NoSuchKey when absent), IoError for the file.
void download_file(S3Client& client, const S3Uri& src, const std::filesystem::path& dest,
                   std::uint64_t part_bytes = kDefaultPartBytes);

}  // namespace llmt::storage
