// A local cache of objects read from S3-compatible stores (model.init_from, data.train_shards,
// data.val_shards as s3:// URIs): <cache root>/<bucket>/<key>, with a note of the object each file holds
// (ETag and size) in <cache root>/.etags/<bucket>/<key>, so a file whose object is unchanged is not
// downloaded again.
// Thread safety: none per object; processes may share a cache (downloads are renamed into place).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "storage/s3_uri.h"

namespace llmt::storage {

class S3Client;

// The object `uri`, or when no object has that key, every object under "<key>/" (a model directory),
// brought into the cache. Returns the local file or directory. Throws InputError naming `what` (the key or
// flag) when neither exists, StorageError for the store.
std::filesystem::path fetch_cached(S3Client& client, const S3Uri& uri, const std::filesystem::path& cache_root,
                                   std::uint64_t part_bytes, const std::string& what);

// Every object whose key matches the glob `uri.key` (wildcards * ? [..] within one path segment, as
// fnmatch(3) with FNM_PATHNAME), brought into the cache. Returns the local glob matching exactly those
// files (<cache root>/<bucket>/<key>; cached files it matches whose objects are gone are removed).
// Throws InputError naming `what` when nothing matches.
std::string fetch_cached_glob(S3Client& client, const S3Uri& uri, const std::filesystem::path& cache_root,
                              std::uint64_t part_bytes, const std::string& what);

}  // namespace llmt::storage
