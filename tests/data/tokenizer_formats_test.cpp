// Loading the same GPT-2 vocabulary from its three formats gives the same ids. The test converts the
// .tiktoken ranks to GPT-2's vocab.json + merges.txt and to a Hugging Face tokenizer.json by itself
// (bytes_to_unicode, and each merge found as the two-part BPE of the token under lower ranks, the way
// Hugging Face's tiktoken converter does), so it checks the loaders against an independent derivation.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unordered_map>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "core/fs.h"
#include "data/tokenizer/tokenizer.h"

namespace llmt::data {
namespace {

namespace fs = std::filesystem;
const std::string kShared = LLMT_SHARED_DIR "/data/";

std::string b64decode(const std::string& in) {
    static const std::string abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : in) {
        if (c == '=') break;
        acc = (acc << 6) | static_cast<uint32_t>(abc.find(c));
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((acc >> bits) & 0xFF));
        }
    }
    return out;
}

// GPT-2's bytes_to_unicode, as UTF-8 strings per byte.
std::vector<std::string> byte_strings() {
    std::vector<std::string> m(256);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        const uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
        std::string s;
        if (cp < 0x80) {
            s.push_back(static_cast<char>(cp));
        } else {
            s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
            s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        }
        m[b] = s;
    }
    return m;
}

std::string to_byte_level(const std::string& bytes) {
    static const auto m = byte_strings();
    std::string s;
    for (unsigned char c : bytes) s += m[c];
    return s;
}

struct Gpt2Files {
    std::vector<std::string> tokens;  // by rank
    std::vector<std::pair<std::string, std::string>> merges;  // for ranks 256..
};

// Plain BPE with ranks below max_rank: repeatedly merge the lowest-ranked adjacent pair.
std::vector<std::string> naive_bpe(const std::unordered_map<std::string, uint32_t>& ranks, const std::string& word,
                                   uint32_t max_rank) {
    std::vector<std::string> parts;
    for (char c : word) parts.emplace_back(1, c);
    for (;;) {
        uint32_t best = UINT32_MAX;
        std::size_t at = 0;
        for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
            auto it = ranks.find(parts[i] + parts[i + 1]);
            if (it != ranks.end() && it->second < max_rank && it->second < best) {
                best = it->second;
                at = i;
            }
        }
        if (best == UINT32_MAX) return parts;
        parts[at] += parts[at + 1];
        parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
}

const Gpt2Files& gpt2_files() {
    static const Gpt2Files files = [] {
        Gpt2Files f;
        std::ifstream in(kShared + "gpt2.tiktoken");
        // Without the file the merges list is empty and write_vocab_merges' swap would index past it.
        if (!in) throw std::runtime_error("cannot open " + kShared + "gpt2.tiktoken");
        std::string b64, rank;
        std::unordered_map<std::string, uint32_t> ranks;
        while (in >> b64 >> rank) {
            f.tokens.push_back(b64decode(b64));
            EXPECT_EQ(std::stoul(rank), f.tokens.size() - 1);
            ranks[f.tokens.back()] = static_cast<uint32_t>(f.tokens.size() - 1);
        }
        for (uint32_t r = 256; r < f.tokens.size(); ++r) {
            const auto parts = naive_bpe(ranks, f.tokens[r], r);
            EXPECT_EQ(parts.size(), 2u) << "rank " << r;
            f.merges.emplace_back(parts[0], parts[1]);
        }
        return f;
    }();
    return files;
}

struct TempDir {
    fs::path path;
    TempDir() {
        path = fs::temp_directory_path() / ("llmt_tokfmt_" + std::to_string(::getpid()));
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

void write_vocab_merges(const fs::path& vocab, const fs::path& merges, std::size_t swap_at = 0) {
    const auto& f = gpt2_files();
    nlohmann::json v = nlohmann::json::object();
    for (std::size_t r = 0; r < f.tokens.size(); ++r) v[to_byte_level(f.tokens[r])] = r;
    v["<|endoftext|>"] = 50256;
    write_file_atomic(vocab, v.dump());
    std::string m = "#version: 0.2\n";
    auto merges_list = f.merges;
    if (swap_at) std::swap(merges_list[swap_at], merges_list[swap_at + 1]);
    for (const auto& [a, b] : merges_list) m += to_byte_level(a) + " " + to_byte_level(b) + "\n";
    write_file_atomic(merges, m);
}

std::vector<std::string> sample_texts() {
    std::vector<std::string> texts = {"Hello world", "The quick brown fox, don't you think?  \n\n  1234567 ",
                                      "Zürich — 東京 🙂 <|endoftext|> done", std::string(100, ' ') + "x"};
    std::ifstream in(kShared + "tokenizer_cases.jsonl");
    std::string line;
    while (std::getline(in, line)) texts.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
    return texts;
}

void expect_same_as_tiktoken_file(const Tokenizer& tok) {
    const Tokenizer ref = Tokenizer::load(kShared + "gpt2.tiktoken");
    EXPECT_EQ(tok.vocab_size(), 50257u);
    EXPECT_EQ(tok.eot_token(), 50256u);
    for (const auto& t : sample_texts()) {
        EXPECT_EQ(tok.encode(t, true), ref.encode(t, true)) << t;
        EXPECT_EQ(tok.encode_ordinary(t), ref.encode_ordinary(t)) << t;
    }
    std::vector<uint32_t> all(50257);
    for (uint32_t i = 0; i < all.size(); ++i) all[i] = i;
    EXPECT_EQ(tok.decode(all), ref.decode(all));
}

TEST(TokenizerFormats, VocabJsonAndMergesTxt) {
    TempDir dir;
    write_vocab_merges(dir.path / "vocab.json", dir.path / "merges.txt");
    const Tokenizer by_dir = Tokenizer::load(dir.path.string());
    expect_same_as_tiktoken_file(by_dir);
    EXPECT_EQ(by_dir.source_path(), (dir.path / "vocab.json").string());
    // Megatron-style prefix: gpt2-vocab.json + gpt2-merges.txt.
    write_vocab_merges(dir.path / "gpt2-vocab.json", dir.path / "gpt2-merges.txt");
    const Tokenizer by_prefix = Tokenizer::load((dir.path / "gpt2-").string());
    EXPECT_EQ(by_prefix.encode_ordinary("Hello world"), (std::vector<uint32_t>{15496, 995}));
    EXPECT_EQ(by_prefix.source_sha256(), by_dir.source_sha256());
}

TEST(TokenizerFormats, HuggingFaceTokenizerJson) {
    TempDir dir;
    const auto& f = gpt2_files();
    nlohmann::json j;
    j["version"] = "1.0";
    j["added_tokens"] = nlohmann::json::array(
        {{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}});
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                          {"use_regex", true}};
    nlohmann::json vocab = nlohmann::json::object();
    for (std::size_t r = 0; r < f.tokens.size(); ++r) vocab[to_byte_level(f.tokens[r])] = r;
    vocab["<|endoftext|>"] = 50256;
    nlohmann::json merges = nlohmann::json::array();
    for (std::size_t i = 0; i < f.merges.size(); ++i) {
        // Both spellings Hugging Face has used: "a b" and ["a", "b"].
        const std::string a = to_byte_level(f.merges[i].first), b = to_byte_level(f.merges[i].second);
        if (i % 2)
            merges.push_back(a + " " + b);
        else
            merges.push_back(nlohmann::json::array({a, b}));
    }
    j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}};
    write_file_atomic(dir.path / "tokenizer.json", j.dump());
    expect_same_as_tiktoken_file(Tokenizer::load((dir.path / "tokenizer.json").string()));

    j["pre_tokenizer"]["add_prefix_space"] = true;
    write_file_atomic(dir.path / "prefix.json", j.dump());
    try {
        Tokenizer::load((dir.path / "prefix.json").string());
        FAIL() << "add_prefix_space accepted";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("pre_tokenizer"), std::string::npos) << e.what();
    }
    j["pre_tokenizer"]["add_prefix_space"] = false;
    j["added_tokens"][0]["id"] = "fifty";  // a wrong JSON type deep inside is a FormatError too
    write_file_atomic(dir.path / "type.json", j.dump());
    EXPECT_THROW(Tokenizer::load((dir.path / "type.json").string()), FormatError);
    write_file_atomic(dir.path / "broken.json", "{\"model\": ");
    EXPECT_THROW(Tokenizer::load((dir.path / "broken.json").string()), FormatError);
}

TEST(TokenizerFormats, MergesOutOfIdOrderAreRefusedWithTheLine) {
    TempDir dir;
    // Swapping merges 1000 and 1001 gives their tokens ranks that disagree with vocab.json's ids.
    write_vocab_merges(dir.path / "vocab.json", dir.path / "merges.txt", 1000);
    try {
        Tokenizer::load(dir.path.string());
        FAIL() << "accepted";
    } catch (const FormatError& e) {
        // merges.txt line 1002: the #version line, then merge 1000 (0-based) on line 1002.
        EXPECT_NE(std::string(e.what()).find("merges.txt:1002"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace llmt::data
