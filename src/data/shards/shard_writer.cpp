// Shard writer (docs/formats/shards.md): temp file + placeholder header, patched, fsynced, renamed.
#include "data/shards/shard_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"
#include "core/error.h"
#include "core/fs.h"
#include "data/shards/shard.h"

namespace llmt::data {
namespace {

constexpr std::size_t kBufferBytes = 1 << 20;

[[noreturn]] void throw_io(const char* what, const std::filesystem::path& p, int err) {
    throw IoError(fmt::format("cannot {} '{}': {}", what, p.string(), std::strerror(err)));
}

void write_all(int fd, const uint8_t* p, std::size_t n, off_t offset, const std::filesystem::path& path) {
    while (n > 0) {
        ssize_t w = offset >= 0 ? ::pwrite(fd, p, n, offset) : ::write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            throw_io("write", path, errno);
        }
        p += w;
        n -= static_cast<std::size_t>(w);
        if (offset >= 0) offset += w;
    }
}

}  // namespace

ShardWriter::ShardWriter(std::filesystem::path dir, std::string prefix, std::size_t shard_tokens,
                         std::size_t vocab_size)
    : dir_(std::move(dir)),
      prefix_(std::move(prefix)),
      shard_tokens_(shard_tokens),
      vocab_size_(vocab_size),
      token_bytes_(vocab_size <= 65536 ? 2 : 4) {
    LLMT_CHECK(shard_tokens >= 1 && shard_tokens <= 2147483647ULL,
               "shard size {} tokens is out of range: expected 1 .. 2147483647 (the llm.c header's count is an int32)",
               shard_tokens);
    LLMT_CHECK(vocab_size >= 1 && vocab_size <= (1ULL << 32), "vocabulary size {} cannot be stored in a token shard",
               vocab_size);
    buf_.reserve(kBufferBytes);
}

ShardWriter::~ShardWriter() {
    if (fd_ >= 0) {
        // Abandoned mid-shard (an exception unwound us): remove the partial temp file.
        ::close(fd_);
        ::unlink(tmp_path_.c_str());
    }
}

void ShardWriter::open_next() {
    name_ = fmt::format("{}_{:06d}.bin", prefix_, done_.size());
    tmp_path_ = dir_ / (name_ + fmt::format(".tmp.{}", ::getpid()));
    fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw_io("create", tmp_path_, errno);
    uint8_t header[kShardHeaderBytes] = {};  // patched with the count in close_current()
    write_all(fd_, header, sizeof header, -1, tmp_path_);
    in_shard_ = 0;
}

void ShardWriter::flush_buffer() {
    if (!buf_.empty()) write_all(fd_, buf_.data(), buf_.size(), -1, tmp_path_);
    buf_.clear();
}

void ShardWriter::close_current() {
    flush_buffer();
    int32_t header[kShardHeaderInts] = {};
    header[0] = token_bytes_ == 2 ? kShardMagicU16 : kShardMagicU32;
    header[1] = token_bytes_ == 2 ? kShardVersionU16 : kShardVersionU32;
    header[2] = static_cast<int32_t>(in_shard_);
    write_all(fd_, reinterpret_cast<const uint8_t*>(header), sizeof header, 0, tmp_path_);
    if (::fsync(fd_) != 0) throw_io("fsync", tmp_path_, errno);
    if (::close(fd_) != 0) {
        fd_ = -1;
        throw_io("close", tmp_path_, errno);
    }
    fd_ = -1;
    const std::filesystem::path final_path = dir_ / name_;
    if (::rename(tmp_path_.c_str(), final_path.c_str()) != 0) throw_io("rename temp file to", final_path, errno);
    done_.push_back(ShardInfo{name_, in_shard_, kShardHeaderBytes + in_shard_ * token_bytes_});
}

void ShardWriter::append(std::span<const uint32_t> tokens) {
    LLMT_ASSERT(!finished_);
    for (uint32_t id : tokens) {
        LLMT_CHECK(id < vocab_size_, "token id {} is not below the vocabulary size {}", id, vocab_size_);
        if (fd_ < 0) open_next();
        uint8_t b[4];
        std::memcpy(b, &id, 4);  // little-endian host (static_assert in shard.cpp)
        buf_.insert(buf_.end(), b, b + token_bytes_);
        if (buf_.size() >= kBufferBytes) flush_buffer();
        ++in_shard_;
        ++total_;
        if (in_shard_ == shard_tokens_) close_current();
    }
}

std::vector<ShardInfo> ShardWriter::finish() {
    LLMT_ASSERT(!finished_);
    finished_ = true;
    if (fd_ >= 0) close_current();
    if (!done_.empty()) fsync_path(dir_);
    return done_;
}

void write_shard_file(const std::filesystem::path& path, std::span<const uint32_t> tokens, std::size_t vocab_size) {
    const std::size_t token_bytes = vocab_size <= 65536 ? 2 : 4;
    LLMT_CHECK(tokens.size() <= 2147483647ULL, "{} tokens do not fit one shard (at most 2147483647)", tokens.size());
    std::string bytes(kShardHeaderBytes + tokens.size() * token_bytes, '\0');
    int32_t header[3] = {token_bytes == 2 ? kShardMagicU16 : kShardMagicU32,
                         token_bytes == 2 ? kShardVersionU16 : kShardVersionU32, static_cast<int32_t>(tokens.size())};
    std::memcpy(bytes.data(), header, sizeof header);
    char* p = bytes.data() + kShardHeaderBytes;
    for (uint32_t id : tokens) {
        LLMT_CHECK(id < vocab_size, "token id {} is not below the vocabulary size {}", id, vocab_size);
        std::memcpy(p, &id, token_bytes);
        p += token_bytes;
    }
    write_file_atomic(path, bytes);
}

}  // namespace llmt::data
