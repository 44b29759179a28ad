// Shard reader (docs/formats/shards.md): mmap, header/size validation, lazy per-read id checks.
#include "data/shards/shard.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "core/regular_file.h"

namespace llmt::data {

static_assert(std::endian::native == std::endian::little,
              "shards are little-endian; big-endian hosts need byte swaps");

ShardFormat parse_shard_format(const std::string& name) {
    if (name == "llmc") return ShardFormat::kLlmc;
    if (name == "nanogpt") return ShardFormat::kNanoGptU16;
    throw InputError(fmt::format("unknown shard format '{}': expected one of llmc, nanogpt", name));
}

namespace {

[[noreturn]] void format_error(const std::filesystem::path& path, std::size_t offset, const std::string& what) {
    throw FormatError(fmt::format("{}: at byte offset {}: {}", path.string(), offset, what));
}

int32_t load_i32(const uint8_t* p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

}  // namespace

Shard Shard::open(const std::filesystem::path& path, ShardFormat format, std::size_t vocab_size) {
    LLMT_ASSERT(vocab_size > 0);
    RegularFile file = open_regular_file(path, "shard");
    const int fd = file.fd.release();
    Shard s;
    s.path_ = path;
    s.vocab_size_ = vocab_size;
    s.map_bytes_ = static_cast<std::size_t>(file.size);
    if (s.map_bytes_ > 0) {
        void* m = ::mmap(nullptr, s.map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
        int err = errno;
        ::close(fd);
        if (m == MAP_FAILED)
            throw IoError(fmt::format("cannot mmap shard '{}': {}", path.string(), std::strerror(err)));
        s.map_ = static_cast<const uint8_t*>(m);
    } else {
        ::close(fd);
    }
    // From here `s` owns the mapping, so every throw below unmaps it.
    const std::size_t size = s.map_bytes_;
    if (format == ShardFormat::kNanoGptU16) {
        if (size % 2 != 0) {
            format_error(path, size - 1,
                         fmt::format("a nanoGPT uint16 token file must have an even size, found {} bytes", size));
        }
        s.token_bytes_ = 2;
        s.data_offset_ = 0;
        s.count_ = size / 2;
        return s;
    }
    if (size < kShardHeaderBytes) {
        format_error(
            path, size,
            fmt::format("file is {} bytes, shorter than the {}-byte llm.c shard header (truncated?{})", size,
                        kShardHeaderBytes, " hint: nanoGPT's header-less .bin files need shard format 'nanogpt'"));
    }
    const int32_t magic = load_i32(s.map_);
    const int32_t version = load_i32(s.map_ + 4);
    const int32_t count = load_i32(s.map_ + 8);
    if (magic == kShardMagicU16) {
        if (version != kShardVersionU16) {
            format_error(
                path, 4,
                fmt::format("magic {} (uint16 tokens) needs version {}, found {}", magic, kShardVersionU16, version));
        }
        s.token_bytes_ = 2;
    } else if (magic == kShardMagicU32) {
        if (version != kShardVersionU32) {
            format_error(
                path, 4,
                fmt::format("magic {} (uint32 tokens) needs version {}, found {}", magic, kShardVersionU32, version));
        }
        s.token_bytes_ = 4;
    } else {
        // The bytes found are not printed: a file named by mistake may hold a secret.
        format_error(
            path, 0,
            fmt::format("bad magic: expected {} (uint16 tokens) or {} (uint32 tokens) of an llm.c token shard",
                        kShardMagicU16, kShardMagicU32));
    }
    if (count < 0) format_error(path, 8, fmt::format("negative token count {}", count));
    const std::size_t expect = kShardHeaderBytes + static_cast<std::size_t>(count) * s.token_bytes_;
    if (size != expect) {
        format_error(path, 8,
                     fmt::format("header says {} tokens ({} bytes with the header) but the file is {} bytes{}", count,
                                 expect, size, size < expect ? " (truncated?)" : " (trailing bytes)"));
    }
    s.data_offset_ = kShardHeaderBytes;
    s.count_ = static_cast<std::size_t>(count);
    return s;
}

Shard::Shard(Shard&& o) noexcept { *this = std::move(o); }

Shard& Shard::operator=(Shard&& o) noexcept {
    if (this != &o) {
        if (map_) ::munmap(const_cast<uint8_t*>(map_), map_bytes_);
        path_ = std::move(o.path_);
        map_ = std::exchange(o.map_, nullptr);
        map_bytes_ = std::exchange(o.map_bytes_, 0);
        data_offset_ = o.data_offset_;
        count_ = std::exchange(o.count_, 0);
        token_bytes_ = o.token_bytes_;
        vocab_size_ = o.vocab_size_;
    }
    return *this;
}

Shard::~Shard() {
    if (map_) ::munmap(const_cast<uint8_t*>(map_), map_bytes_);
}

uint32_t Shard::at(std::size_t i) const {
    LLMT_ASSERT(i < count_);
    const uint8_t* p = map_ + data_offset_ + i * token_bytes_;
    if (token_bytes_ == 2) {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return v;
    }
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

void Shard::throw_bad_token(std::size_t index, uint32_t id) const {
    format_error(
        path_, data_offset_ + index * token_bytes_,
        fmt::format(
            "token {} has id {}, which is not below the vocabulary size {} (wrong tokenizer, or a corrupt file?)",
            index, id, vocab_size_));
}

void Shard::read(std::size_t begin, std::size_t n, int32_t* out) const {
    LLMT_ASSERT(begin <= count_ && n <= count_ - begin);
    const uint8_t* base = map_ + data_offset_ + begin * token_bytes_;
    // Convert first, then check with one branch-free max per chunk; the slow path only finds the index.
    uint32_t max_id = 0;
    if (token_bytes_ == 2) {
        for (std::size_t i = 0; i < n; ++i) {
            uint16_t v;
            std::memcpy(&v, base + 2 * i, 2);
            out[i] = v;
            max_id = v > max_id ? v : max_id;
        }
    } else {
        for (std::size_t i = 0; i < n; ++i) {
            uint32_t v;
            std::memcpy(&v, base + 4 * i, 4);
            out[i] = static_cast<int32_t>(v);
            max_id = v > max_id ? v : max_id;
        }
    }
    if (max_id >= vocab_size_) {
        for (std::size_t i = 0; i < n; ++i) {
            uint32_t v = at(begin + i);
            if (v >= vocab_size_) throw_bad_token(begin + i, v);
        }
    }
}

void Shard::validate() const {
    constexpr std::size_t kChunk = 1 << 16;
    std::vector<int32_t> buf(kChunk);
    for (std::size_t i = 0; i < count_; i += kChunk) read(i, std::min(kChunk, count_ - i), buf.data());
}

}  // namespace llmt::data
