#include "storage/transfer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "storage/s3_client.h"

namespace llmt::storage {

namespace fs = std::filesystem;

namespace {

std::string read_range(std::ifstream& in, const fs::path& file, std::uint64_t n) {
    std::string buf(n, '\0');
    in.read(buf.data(), static_cast<std::streamsize>(n));
    if (static_cast<std::uint64_t>(in.gcount()) != n)
        throw IoError(fmt::format("cannot read '{}' for upload: {}", file.string(), std::strerror(errno)));
    return buf;
}

int upload_multipart(S3Client& client, std::ifstream& in, const fs::path& file, std::uint64_t size,
                      const S3Uri& dest, const TransferOptions& opts) {
    const int parts = static_cast<int>((size + opts.part_bytes - 1) / opts.part_bytes);
    const std::string id = client.create_multipart_upload(dest);
    std::vector<UploadedPart> done;
    try {
        for (int p = 1; p <= parts; ++p) {
            const std::uint64_t n = std::min(opts.part_bytes, size - (p - 1) * opts.part_bytes);
            done.push_back(client.upload_part(dest, id, p, read_range(in, file, n)));
            if (opts.on_part) opts.on_part(p, parts);
        }
        client.complete_multipart_upload(dest, id, done);
        return parts;
    } catch (...) {
        try {
            client.abort_multipart_upload(dest, id);
        } catch (const std::exception&) {
            // The store keeps the parts until a lifecycle rule drops them (docs/object_storage.md).
        }
        throw;
    }
}

}  // namespace

int upload_file(S3Client& client, const fs::path& file, const S3Uri& dest, const TransferOptions& opts) {
    std::error_code ec;
    const std::uint64_t size = fs::file_size(file, ec);
    if (ec) throw IoError(fmt::format("cannot upload '{}': {}", file.string(), ec.message()));
    std::ifstream in(file, std::ios::binary);
    if (!in) throw IoError(fmt::format("cannot open '{}' for upload: {}", file.string(), std::strerror(errno)));
    if (size <= opts.part_bytes) {
        client.put_object(dest, read_range(in, file, size));
        return 1;
    }
    return upload_multipart(client, in, file, size, dest, opts);
}

void download_file(S3Client& client, const S3Uri& src, const fs::path& dest, std::uint64_t part_bytes) {
    const auto info = client.head_object(src);
    if (!info) throw StorageError(fmt::format("object storage: {} does not exist", src.str()), 404, "NoSuchKey");
    if (!dest.parent_path().empty()) fs::create_directories(dest.parent_path());
    const fs::path tmp = dest.string() + fmt::format(".part-{}", ::getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw IoError(fmt::format("cannot write '{}': {}", tmp.string(), std::strerror(errno)));
        for (std::uint64_t off = 0; off < info->size; off += part_bytes) {
            const std::string piece =
                client.get_object(src, std::make_pair(off, std::min(part_bytes, info->size - off)));
            out.write(piece.data(), static_cast<std::streamsize>(piece.size()));
        }
        out.flush();
        if (!out) throw IoError(fmt::format("cannot write '{}': {}", tmp.string(), std::strerror(errno)));
    }
    fs::rename(tmp, dest);
}

}  // namespace llmt::storage
