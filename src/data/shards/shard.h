// Token shard reader: llm.c's `.bin` layout (256 x int32 header, then uint16/uint32 tokens) and
// nanoGPT's header-less uint16 `train.bin`/`val.bin`, memory-mapped. Format: docs/formats/shards.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace llmt::data {

enum class ShardFormat {
    kLlmc,        // 1024-byte header; magic 20240520/v1 (uint16) or 20240801/v7 (uint32)
    kNanoGptU16,  // no header; raw uint16 tokens (nanoGPT's prepare.py)
};

// Parses "llmc" / "nanogpt"; throws InputError listing the choices.
ShardFormat parse_shard_format(const std::string& name);

inline constexpr int32_t kShardMagicU16 = 20240520;
inline constexpr int32_t kShardVersionU16 = 1;
inline constexpr int32_t kShardMagicU32 = 20240801;
inline constexpr int32_t kShardVersionU32 = 7;
inline constexpr std::size_t kShardHeaderInts = 256;
inline constexpr std::size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);

// One read-only memory-mapped shard. Opening validates the header and the file size; token ids are
// validated against vocab_size as they are read (see read()) or all at once by validate().
// Thread safety: const methods may be called from any number of threads. Movable, not copyable.
class Shard {
public:
    // Throws IoError when the file cannot be opened/mapped and FormatError (naming the file and the
    // byte offset) when its header or size is wrong.
    static Shard open(const std::filesystem::path& path, ShardFormat format, std::size_t vocab_size);

    Shard(Shard&& other) noexcept;
    Shard& operator=(Shard&& other) noexcept;
    Shard(const Shard&) = delete;
    Shard& operator=(const Shard&) = delete;
    ~Shard();

    std::size_t size() const { return count_; }              // number of tokens
    std::size_t token_bytes() const { return token_bytes_; }  // 2 or 4
    std::size_t data_offset() const { return data_offset_; }  // byte offset of token 0 in the file
    const std::filesystem::path& path() const { return path_; }

    // Copies tokens [begin, begin+n) into out as int32. Requires begin+n <= size() (LLMT_ASSERT).
    // Throws FormatError naming the file and byte offset of the first id >= vocab_size.
    void read(std::size_t begin, std::size_t n, int32_t* out) const;

    // Token i (unchecked against the vocabulary). Requires i < size().
    uint32_t at(std::size_t i) const;

    // Checks every token id < vocab_size; throws FormatError at the first that is not.
    void validate() const;

private:
    Shard() = default;
    [[noreturn]] void throw_bad_token(std::size_t index, uint32_t id) const;

    std::filesystem::path path_;
    const uint8_t* map_ = nullptr;  // whole file, or nullptr for an empty nanoGPT file
    std::size_t map_bytes_ = 0;
    std::size_t data_offset_ = 0;
    std::size_t count_ = 0;
    std::size_t token_bytes_ = 2;
    std::size_t vocab_size_ = 0;
};

}  // namespace llmt::data
