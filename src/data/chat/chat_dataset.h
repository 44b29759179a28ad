// Tokenized chat examples, flat (one token array, per-example offsets, an assistant flag per token), and
// their cache file `examples.bin` (docs/formats/chat_jsonl.md, "Cache"): a 64-byte header ("LLMTCHT1",
// version, counts, CRC-32C of the payload), then offsets u64[n+1], tokens u32[n_tokens], assistant
// u8[n_tokens], little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "data/chat/chat_tokenize.h"

namespace llmt::data {

// Thread safety: const methods may be called concurrently.
struct ChatDataset {
    std::vector<uint64_t> offsets{0};  // example i is tokens [offsets[i], offsets[i+1])
    std::vector<uint32_t> tokens;
    std::vector<uint8_t> assistant;    // per token: 1 = assistant content or its <|eot_id|>

    std::size_t size() const { return offsets.size() - 1; }
    std::size_t length(std::size_t i) const { return static_cast<std::size_t>(offsets[i + 1] - offsets[i]); }
    std::span<const uint32_t> tokens_of(std::size_t i) const {
        return {tokens.data() + offsets[i], length(i)};
    }
    std::span<const uint8_t> assistant_of(std::size_t i) const {
        return {assistant.data() + offsets[i], length(i)};
    }
    void append(const TokenizedChat& t);
};

// Writes `ds` to `path` atomically (core/fs.h). Throws IoError.
void write_chat_dataset(const std::filesystem::path& path, const ChatDataset& ds);
// Reads a file write_chat_dataset wrote. Throws FormatError naming the file and what is wrong (magic,
// version, size, checksum, offsets), IoError.
ChatDataset read_chat_dataset(const std::filesystem::path& path);

}  // namespace llmt::data
