// A run's tokenizer written as a Hugging Face model directory's files (data/tokenizer/hf_tokenizer_files.h): GPT-2's
// vocab.json + merges.txt recovered from gpt2.tiktoken load back as the same tokenizer (the same ids for
// every text, the 50,000 merges in rank order); Meta's Llama 3 files are copied as they are, with the ids
// of its tokenizer_config.json; a tokenizer.json without a tokenizer_config.json gets one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

#include "core/fs.h"
#include "data/tokenizer/hf_tokenizer_files.h"
#include "data/test_files.h"
#include "data/tokenizer/tokenizer.h"

namespace llmt::data {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const fs::path kLlama3 = LLMT_SOURCE_DIR "/data/tokenizers/llama3";

TEST(HfTokenizerFiles, Gpt2VocabAndMergesLoadBackAsTheSameTokenizer) {
    TempDir dir;
    const HfTokenizerFiles files = HfTokenizerFiles::from_spec("gpt2", 1024);
    files.write(dir.path());
    EXPECT_EQ(files.names(), (std::vector<std::string>{"vocab.json", "merges.txt", "tokenizer_config.json"}));
    const std::string merges = read_file(dir / "merges.txt");
    EXPECT_EQ(merges.rfind("#version: 0.2\nĠ t\n", 0), 0u) << merges.substr(0, 40);  // GPT-2's first merge
    EXPECT_EQ(std::count(merges.begin(), merges.end(), '\n'), 50001);
    // Our loader checks that the merge order gives every id (ranks_from_merges): the two files are GPT-2's.
    const Tokenizer a = Tokenizer::load("gpt2"), b = Tokenizer::load(dir.path().string());
    ASSERT_EQ(a.vocab_size(), b.vocab_size());
    for (const char* text : {"Hello world, it's 2026!", "  indented\n\n\tcode()  ", "café 日本語 🙂 <|endoftext|>",
                             "The quick brown fox jumps over the lazy dog."})
        EXPECT_EQ(a.encode(text, true), b.encode(text, true)) << text;
    for (uint32_t id : {0u, 256u, 1000u, 50255u, 50256u}) EXPECT_EQ(a.token_bytes(id), b.token_bytes(id)) << id;
    const auto cfg = nlohmann::json::parse(read_file(dir / "tokenizer_config.json"));
    EXPECT_EQ(cfg["tokenizer_class"], "GPT2Tokenizer");
    EXPECT_EQ(cfg["eos_token"], "<|endoftext|>");
    EXPECT_EQ(cfg["model_max_length"], 1024);
    EXPECT_EQ(files.ids().bos_token_id, std::vector<int64_t>{50256});
    EXPECT_EQ(files.ids().eos_token_id, std::vector<int64_t>{50256});
    EXPECT_EQ(files.ids().pad_token_id, std::vector<int64_t>{50256});
    EXPECT_EQ(files.ids().generation_eos_token_id, std::vector<int64_t>{50256});
    // A directory written so is itself a spec: its files are copied as they are.
    const fs::path again = dir / "again";
    fs::create_directories(again);
    const HfTokenizerFiles copied = HfTokenizerFiles::from_spec(dir.path().string(), 1024);
    copied.write(again);
    for (const char* f : {"vocab.json", "merges.txt", "tokenizer_config.json"})
        EXPECT_EQ(read_file(dir / f), read_file(again / f)) << f;
}

TEST(HfTokenizerFiles, Llama3FilesAreCopiedWithTheirIds) {
    TempDir dir;
    const HfTokenizerFiles files = HfTokenizerFiles::from_spec(kLlama3.string(), 128);
    files.write(dir.path());
    EXPECT_EQ(files.names(), (std::vector<std::string>{"tokenizer.json", "tokenizer_config.json"}));
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
        EXPECT_EQ(read_file(kLlama3 / f), read_file(dir / f)) << f;
    EXPECT_EQ(files.ids().bos_token_id, std::vector<int64_t>{128000});  // <|begin_of_text|>
    EXPECT_EQ(files.ids().eos_token_id, std::vector<int64_t>{128001});  // <|end_of_text|>
    EXPECT_EQ(files.ids().pad_token_id, std::vector<int64_t>{128001});  // no pad_token: the eos
    // The chat template ends a turn with <|eot_id|>: generation stops there too (Llama 3 Instruct's list).
    EXPECT_EQ(files.ids().generation_eos_token_id, (std::vector<int64_t>{128001, 128009}));
    EXPECT_TRUE(has_hf_tokenizer_files(dir.path()));
}

TEST(HfTokenizerFiles, TokenizerJsonAloneGetsATokenizerConfig) {
    TempDir tmp;
    const fs::path src = tmp / "src", dir = tmp / "out";
    fs::create_directories(src);
    fs::create_directories(dir);
    fs::copy_file(kLlama3 / "tokenizer.json", src / "tokenizer.json");
    const HfTokenizerFiles files = HfTokenizerFiles::from_spec((src / "tokenizer.json").string(), 64);
    files.write(dir);
    const auto cfg = nlohmann::json::parse(read_file(dir / "tokenizer_config.json"));
    EXPECT_EQ(cfg["tokenizer_class"], "PreTrainedTokenizerFast");
    // Llama 3.0's tokenizer.json has no post-processor prefix and nothing names a bos: the end of text.
    EXPECT_EQ(cfg["bos_token"], "<|end_of_text|>");
    EXPECT_EQ(cfg["eos_token"], "<|end_of_text|>");
    EXPECT_EQ(cfg["model_max_length"], 64);
    EXPECT_EQ(files.ids().generation_eos_token_id, std::vector<int64_t>{128001});  // no template, no turn end
    EXPECT_FALSE(has_hf_tokenizer_files(src / "missing"));
}

}  // namespace
}  // namespace llmt::data
