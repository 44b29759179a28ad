// ChatDataset and its examples.bin (chat_dataset.h): header + three arrays, CRC-32C over the arrays.
#include "data/chat/chat_dataset.h"

#include <fmt/format.h>

#include <cstring>
#include <string>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/fs.h"

namespace llmt::data {
namespace {

constexpr char kMagic[8] = {'L', 'L', 'M', 'T', 'C', 'H', 'T', '1'};
constexpr uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 64;

struct Header {
    char magic[8];
    uint32_t version;
    uint32_t crc;  // CRC-32C of everything after the header
    uint64_t examples;
    uint64_t tokens;
    char reserved[kHeaderBytes - 32];
};
static_assert(sizeof(Header) == kHeaderBytes);

template <typename T>
void append_array(std::string& out, const std::vector<T>& v) {
    out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <typename T>
void read_array(const std::string& bytes, std::size_t& at, std::vector<T>& v, std::size_t n) {
    v.resize(n);
    std::memcpy(v.data(), bytes.data() + at, n * sizeof(T));
    at += n * sizeof(T);
}

}  // namespace

void ChatDataset::append(const TokenizedChat& t) {
    tokens.insert(tokens.end(), t.tokens.begin(), t.tokens.end());
    assistant.insert(assistant.end(), t.assistant.begin(), t.assistant.end());
    offsets.push_back(tokens.size());
}

void write_chat_dataset(const std::filesystem::path& path, const ChatDataset& ds) {
    std::string payload;
    append_array(payload, ds.offsets);
    append_array(payload, ds.tokens);
    append_array(payload, ds.assistant);
    Header h{};
    std::memcpy(h.magic, kMagic, sizeof(kMagic));
    h.version = kVersion;
    h.crc = crc32c(payload);
    h.examples = ds.size();
    h.tokens = ds.tokens.size();
    std::string bytes(reinterpret_cast<const char*>(&h), sizeof(h));
    bytes += payload;
    write_file_atomic(path, bytes);
}

ChatDataset read_chat_dataset(const std::filesystem::path& path) {
    const std::string bytes = read_file(path);
    const std::string where = path.string();
    if (bytes.size() < kHeaderBytes)
        throw FormatError(
            fmt::format("{}: {} bytes, shorter than the {}-byte header", where, bytes.size(), kHeaderBytes));
    Header h;
    std::memcpy(&h, bytes.data(), sizeof(h));
    if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0)
        throw FormatError(fmt::format("{}: offset 0: not a chat examples file (magic \"LLMTCHT1\" expected)", where));
    if (h.version != kVersion)
        throw FormatError(
            fmt::format("{}: offset 8: version {}, this build reads version {}", where, h.version, kVersion));
    const bool counts_fit = h.examples < bytes.size() && h.tokens < bytes.size();  // no overflow below
    const uint64_t expect = counts_fit ? kHeaderBytes + (h.examples + 1) * 8 + h.tokens * 5 : 0;
    if (!counts_fit || bytes.size() != expect)
        throw FormatError(fmt::format("{}: {} bytes, expected {} for {} examples of {} tokens in all", where,
                                      bytes.size(), expect, h.examples, h.tokens));
    if (crc32c(bytes.data() + kHeaderBytes, bytes.size() - kHeaderBytes) != h.crc)
        throw FormatError(fmt::format(
            "{}: offset {}: the checksum does not match (a damaged file: delete it to rebuild)", where, kHeaderBytes));
    ChatDataset ds;
    std::size_t at = kHeaderBytes;
    read_array(bytes, at, ds.offsets, h.examples + 1);
    read_array(bytes, at, ds.tokens, h.tokens);
    read_array(bytes, at, ds.assistant, h.tokens);
    for (std::size_t i = 0; i < h.examples; ++i)
        if (ds.offsets[0] != 0 || ds.offsets[i] > ds.offsets[i + 1] || ds.offsets.back() != h.tokens)
            throw FormatError(fmt::format("{}: example {}'s offsets are out of order or past the tokens", where, i));
    return ds;
}

}  // namespace llmt::data
