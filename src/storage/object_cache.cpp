#include "storage/object_cache.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <fstream>
#include <set>

#include "core/error.h"
#include "core/fs.h"
#include "storage/s3_client.h"
#include "storage/transfer.h"

namespace llmt::storage {

namespace fs = std::filesystem;

namespace {

std::string read_note(const fs::path& p) {
    std::ifstream in(p);
    std::string s;
    std::getline(in, s);
    return s;
}

// One object into <root>/<bucket>/<key>, unless the cached copy is of the same object.
fs::path fetch_object(S3Client& client, const ObjectInfo& info, const std::string& bucket, const fs::path& root,
                      std::uint64_t part_bytes) {
    const fs::path local = root / bucket / info.key;
    const fs::path note = root / ".etags" / bucket / info.key;  // apart, so no glob over the data matches it
    const std::string want = fmt::format("{} {}", info.etag, info.size);
    std::error_code ec;
    if (fs::is_regular_file(local, ec) && fs::file_size(local, ec) == info.size && read_note(note) == want)
        return local;
    download_file(client, {bucket, info.key}, local, part_bytes);
    fs::create_directories(note.parent_path());
    write_file_atomic(note, want + "\n");
    return local;
}

}  // namespace

fs::path fetch_cached(S3Client& client, const S3Uri& uri, const fs::path& cache_root, std::uint64_t part_bytes,
                      const std::string& what) {
    if (!uri.key.empty() && uri.key.back() != '/') {
        if (auto info = client.head_object(uri))
            return fetch_object(client, *info, uri.bucket, cache_root, part_bytes);
    }
    const S3Uri dir = uri.key.empty() || uri.key.back() == '/' ? uri : S3Uri{uri.bucket, uri.key + "/"};
    const auto objects = client.list_objects(dir);
    if (objects.empty())
        throw InputError(fmt::format("{}: no object {} and nothing under {}", what, uri.str(), dir.str()));
    for (const auto& o : objects) fetch_object(client, o, uri.bucket, cache_root, part_bytes);
    return cache_root / uri.bucket / dir.key;
}

std::string fetch_cached_glob(S3Client& client, const S3Uri& uri, const fs::path& cache_root, std::uint64_t part_bytes,
                              const std::string& what) {
    const auto wild = uri.key.find_first_of("*?[");
    const std::string prefix =
        uri.key.substr(0, wild == std::string::npos ? uri.key.size() : uri.key.rfind('/', wild) + 1);
    std::set<std::string> matched;
    for (const auto& o : client.list_objects({uri.bucket, prefix})) {
        if (::fnmatch(uri.key.c_str(), o.key.c_str(), FNM_PATHNAME) != 0) continue;
        fetch_object(client, o, uri.bucket, cache_root, part_bytes);
        matched.insert(o.key);
    }
    if (matched.empty()) throw InputError(fmt::format("{}: no object matches {}", what, uri.str()));
    // Cached files the glob matches whose objects are gone: removed, so the local glob matches the store's.
    const fs::path base = cache_root / uri.bucket;
    std::error_code ec;
    if (fs::is_directory(base / prefix, ec))
        for (const auto& e : fs::recursive_directory_iterator(base / prefix)) {
            const std::string key = e.path().lexically_relative(base).string();
            if (e.is_regular_file() && ::fnmatch(uri.key.c_str(), key.c_str(), FNM_PATHNAME) == 0 &&
                !matched.count(key))
                fs::remove(e.path(), ec);
        }
    return (cache_root / uri.bucket / uri.key).string();
}

}  // namespace llmt::storage
