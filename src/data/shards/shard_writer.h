// Writes token shards in llm.c's `.bin` layout (docs/formats/shards.md): `<prefix>_000000.bin`, ...
// each with at most shard_tokens tokens; uint16 when the vocabulary fits, uint32 otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace llmt::data {

struct ShardInfo {
    std::string file;  // file name inside the directory ("train_000000.bin")
    uint64_t tokens = 0;
    uint64_t bytes = 0;
};

// Streams tokens into consecutive shard files. Each file is written under a temporary name with a
// placeholder header, the header is patched with the count when the shard is full, then the file is
// fsynced and renamed, so a finished name always holds a complete shard.
// Not thread-safe. Throws IoError on write failures and InputError for ids >= vocab_size.
class ShardWriter {
public:
    // shard_tokens must be in [1, 2^31-1] (the header's count is an int32).
    ShardWriter(std::filesystem::path dir, std::string prefix, std::size_t shard_tokens, std::size_t vocab_size);
    ~ShardWriter();
    ShardWriter(const ShardWriter&) = delete;
    ShardWriter& operator=(const ShardWriter&) = delete;

    void append(std::span<const uint32_t> tokens);
    // Closes the last shard (a split with no tokens writes no file) and returns every shard written.
    std::vector<ShardInfo> finish();

    uint64_t tokens_written() const { return total_; }
    std::size_t token_bytes() const { return token_bytes_; }

private:
    void open_next();
    void close_current();
    void flush_buffer();

    std::filesystem::path dir_;
    std::string prefix_;
    std::size_t shard_tokens_;
    std::size_t vocab_size_;
    std::size_t token_bytes_;
    int fd_ = -1;
    std::filesystem::path tmp_path_;
    std::string name_;
    uint64_t in_shard_ = 0;
    uint64_t total_ = 0;
    std::vector<uint8_t> buf_;
    std::vector<ShardInfo> done_;
    bool finished_ = false;
};

// Writes one shard file holding exactly `tokens` (tests, small tools). Throws like ShardWriter.
void write_shard_file(const std::filesystem::path& path, std::span<const uint32_t> tokens, std::size_t vocab_size);

}  // namespace llmt::data
