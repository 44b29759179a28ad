// `llmtrain data prepare` end to end through the real binary (LLMTRAIN_BIN): text, directory, .gz
// and JSONL inputs -> shards whose decoded text is the documents, each preceded by <|endoftext|>,
// split by document as is_val_document() says; manifest contents; determinism; errors; `data inspect`.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "data/shards/prepare.h"
#include "data/shards/shard.h"
#include "data/tokenizer/tokenizer.h"
#include "test_files.h"

namespace llmt::data {
namespace {

using testing::gzip;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

const std::string kTokenizer = LLMT_SHARED_DIR "/data/gpt2.tiktoken";

const Tokenizer& gpt2() {
    static const Tokenizer tok = Tokenizer::load(kTokenizer);
    return tok;
}

struct Result {
    int rc = -1;
    std::string out, err;
};

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

Result run(const TempDir& d, const std::vector<std::string>& args) {
    const char* bin = std::getenv("LLMTRAIN_BIN");
    EXPECT_NE(bin, nullptr) << "LLMTRAIN_BIN is not set (ctest sets it)";
    std::string cmd = quote(bin ? bin : "llmtrain");
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " >" + quote((d / "stdout").string()) + " 2>" + quote((d / "stderr").string());
    const int status = std::system(cmd.c_str());
    Result r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_bytes(d / "stdout");
    r.err = read_bytes(d / "stderr");
    return r;
}

// The decoded text of a split's shards (in file order) and their total token count.
std::string decode_split(const nlohmann::json& m, const std::filesystem::path& dir, const std::string& split,
                         uint64_t* tokens) {
    std::vector<uint32_t> ids;
    for (const auto& sh : m["splits"][split]["shards"]) {
        auto s = Shard::open(dir / sh["file"].get<std::string>(), ShardFormat::kLlmc, gpt2().vocab_size());
        EXPECT_EQ(s.size(), sh["tokens"].get<uint64_t>());
        EXPECT_EQ(std::filesystem::file_size(dir / sh["file"].get<std::string>()), sh["bytes"].get<uint64_t>());
        s.validate();
        for (std::size_t i = 0; i < s.size(); ++i) ids.push_back(s.at(i));
    }
    *tokens = ids.size();
    return gpt2().decode(ids);
}

// Checks the shards in `out` against the documents, in input order, for split seed/fraction.
void expect_round_trip(const std::filesystem::path& out, const std::vector<std::string>& docs, uint64_t seed,
                       double frac) {
    const auto m = nlohmann::json::parse(read_bytes(out / "manifest.json"));
    std::string want[2];
    uint64_t ndocs[2] = {0, 0};
    for (std::size_t i = 0; i < docs.size(); ++i) {
        const int s = is_val_document(i, seed, frac) ? 1 : 0;
        want[s] += "<|endoftext|>" + docs[i];
        ndocs[s]++;
    }
    const char* names[2] = {"train", "val"};
    for (int s = 0; s < 2; ++s) {
        uint64_t tokens = 0;
        EXPECT_EQ(decode_split(m, out, names[s], &tokens), want[s]) << names[s];
        EXPECT_EQ(m["splits"][names[s]]["tokens"].get<uint64_t>(), tokens);
        EXPECT_EQ(m["splits"][names[s]]["documents"].get<uint64_t>(), ndocs[s]);
    }
}

const std::vector<std::string> kTextDocs = {
    "The first document.\nIt has two lines.\n",
    "Second: numbers 12345 and unicode \xc3\xa9\xe2\x82\xac \xf0\x9f\x98\x80\n",
    "A document that mentions <|endoftext|> as plain text.\n",
    "Fourth, from the gzip file.\n",
    "Fifth, also gzipped,\n  indented line.\n",
    "Sixth, in the last file (no final newline)",
};

TEST(DataPrepare, TextFilesDirectoriesAndGzipRoundTrip) {
    TempDir d;
    write_bytes(d / "in/a.txt", kTextDocs[0] + "\n" + kTextDocs[1] + "\n\n\n" + kTextDocs[2]);
    write_bytes(d / "in/sub/b.txt.gz", gzip("\n" + kTextDocs[3] + " \n" + kTextDocs[4]));
    write_bytes(d / "last.txt", kTextDocs[5]);
    const auto out = d / "shards";
    // seed 3 with fraction 0.3 puts some but not all of the 6 documents in val (checked below).
    auto r = run(d, {"data",
                     "prepare",
                     "--input",
                     (d / "in").string(),
                     (d / "last.txt").string(),
                     "--format",
                     "text",
                     "--tokenizer",
                     kTokenizer,
                     "--out",
                     out.string(),
                     "--val-fraction",
                     "0.3",
                     "--seed",
                     "3",
                     "--shard-tokens",
                     "16",
                     "--threads",
                     "2",
                     "--json"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("data prepare: done"), std::string::npos)
        << "plain progress lines when stderr is not a terminal: " << r.err;
    const auto m = nlohmann::json::parse(r.out);
    EXPECT_EQ(m, nlohmann::json::parse(read_bytes(out / "manifest.json")));
    const uint64_t val_docs = m["splits"]["val"]["documents"].get<uint64_t>();
    EXPECT_GT(val_docs, 0u);
    EXPECT_LT(val_docs, 6u);
    expect_round_trip(out, kTextDocs, 3, 0.3);
    EXPECT_GT(m["splits"]["train"]["shards"].size(), 1u) << "16-token shards: the train split spans several files";
    EXPECT_EQ(m["splits"]["train"]["shards"][0]["file"], "train_000000.bin");
    // Inputs in order with sizes and hashes; tokenizer hash.
    ASSERT_EQ(m["inputs"].size(), 3u);
    EXPECT_EQ(m["inputs"][0]["path"], (d / "in/a.txt").string());
    EXPECT_EQ(m["inputs"][1]["path"], (d / "in/sub/b.txt.gz").string());
    for (const auto& in : m["inputs"]) {
        EXPECT_EQ(in["sha256"], sha256_file(in["path"].get<std::string>()));
        EXPECT_EQ(in["bytes"], std::filesystem::file_size(in["path"].get<std::string>()));
    }
    EXPECT_EQ(m["tokenizer"]["sha256"], gpt2().source_sha256());
    EXPECT_EQ(m["tokenizer"]["vocab_size"], 50257);
    EXPECT_EQ(m["token_dtype"], "uint16");

    // Same bytes with another thread count; and a rerun with bigger shards leaves no stale shard.
    const std::string first_shard = read_bytes(out / "train_000001.bin");
    r = run(d, {"data", "prepare", "--input", (d / "in").string(), (d / "last.txt").string(), "--tokenizer",
                kTokenizer, "--out", (out / "../shards1").string(), "--val-fraction", "0.3", "--seed", "3",
                "--shard-tokens", "16", "--threads", "1", "--quiet"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(r.err.empty()) << r.err;
    EXPECT_EQ(read_bytes(d / "shards1/train_000001.bin"), first_shard);
    r = run(d, {"data", "prepare", "--input", (d / "in").string(), (d / "last.txt").string(), "--tokenizer",
                kTokenizer, "--out", out.string(), "--val-fraction", "0.3", "--seed", "3", "--quiet"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(std::filesystem::exists(out / "train_000000.bin"));
    EXPECT_FALSE(std::filesystem::exists(out / "train_000001.bin"));
    expect_round_trip(out, kTextDocs, 3, 0.3);
}

TEST(DataPrepare, JsonlAndJsonlGzWithDocumentSeparatorsInsideText) {
    TempDir d;
    std::vector<std::string> docs;
    std::string plain, zipped;
    for (int i = 0; i < 40; ++i) {
        const std::string text =
            "Story " + std::to_string(i) + ".\n\nIt has a blank line, \"quotes\" and \xe2\x9c\x93.";
        nlohmann::json j = {{"id", i}, {"story", text}};
        (i < 25 ? plain : zipped) += j.dump() + "\n";
        docs.push_back(text);
    }
    write_bytes(d / "a.jsonl", plain);
    write_bytes(d / "b.jsonl.gz", gzip(zipped));
    auto r = run(d, {"data", "prepare", "--input", (d / "a.jsonl").string(), (d / "b.jsonl.gz").string(), "--format",
                     "jsonl", "--text-field", "story", "--tokenizer", kTokenizer, "--out", (d / "out").string(),
                     "--val-fraction", "0.1", "--quiet"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("val"), std::string::npos);
    expect_round_trip(d / "out", docs, 0, 0.1);
}

TEST(DataPrepare, AtLeastOneValidationDocument) {
    TempDir d;
    write_bytes(d / "two.txt", "doc one\n\ndoc two\n");
    // At 0.001 the hash almost surely picks neither document; the smallest-hash one is moved to val.
    auto r = run(d, {"data", "prepare", "--input", (d / "two.txt").string(), "--tokenizer", kTokenizer, "--out",
                     (d / "out").string(), "--val-fraction", "0.001", "--json"});
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto m = nlohmann::json::parse(r.out);
    EXPECT_EQ(m["splits"]["val"]["documents"], 1);
    EXPECT_EQ(m["splits"]["train"]["documents"], 1);
    uint64_t t = 0;
    const std::string all = decode_split(m, d / "out", "train", &t) + "|" + decode_split(m, d / "out", "val", &t);
    EXPECT_TRUE(all == "<|endoftext|>doc one\n|<|endoftext|>doc two\n" ||
                all == "<|endoftext|>doc two\n|<|endoftext|>doc one\n")
        << all;
    // --val-fraction 0: no val shard at all.
    r = run(d, {"data", "prepare", "--input", (d / "two.txt").string(), "--tokenizer", kTokenizer, "--out",
                (d / "out").string(), "--val-fraction", "0", "--json"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(nlohmann::json::parse(r.out)["splits"]["val"]["shards"].empty());
    EXPECT_FALSE(std::filesystem::exists(d / "out/val_000000.bin")) << "the earlier run's val shard was removed";
}

// Llama 3's vocabulary (128,256 ids) gives uint32 shards (llm.c's 20240801 header, version 7). Meta's
// tokenizer.json has a ByteLevel post-processor (no BOS): documents start with <|end_of_text|>, GPT-2's
// layout. With Llama 3.1's TemplateProcessing post-processor, each document starts with <|begin_of_text|>.
TEST(DataPrepare, Llama3Uint32ShardsAndBosPerDocumentFromThePostProcessor) {
    const std::string dir = LLMT_SOURCE_DIR "/data/tokenizers/llama3";
    const Tokenizer l3 = Tokenizer::load(dir);
    TempDir d;
    write_bytes(d / "docs.txt", "First document.\n\nSecond one, with <|eot_id|> as text.\n\nThird.\n");
    auto shard_ids = [&](const std::filesystem::path& out) {
        const auto m = nlohmann::json::parse(read_bytes(out / "manifest.json"));
        EXPECT_EQ(m["token_dtype"], "uint32");
        const std::string bytes = read_bytes(out / "train_000000.bin");
        int32_t header[3];
        std::memcpy(header, bytes.data(), sizeof header);
        EXPECT_EQ(header[0], 20240801);
        EXPECT_EQ(header[1], 7);
        auto s = Shard::open(out / "train_000000.bin", ShardFormat::kLlmc, l3.vocab_size());
        std::vector<uint32_t> ids;
        for (std::size_t i = 0; i < s.size(); ++i) ids.push_back(s.at(i));
        EXPECT_EQ(static_cast<std::size_t>(header[2]), ids.size());
        return std::make_pair(m, ids);
    };
    auto r = run(d, {"data", "prepare", "--input", (d / "docs.txt").string(), "--tokenizer", dir, "--out",
                     (d / "out").string(), "--val-fraction", "0"});
    ASSERT_EQ(r.rc, 0) << r.err;
    auto [m, ids] = shard_ids(d / "out");
    EXPECT_EQ(l3.decode(ids), "<|end_of_text|>First document.\n<|end_of_text|>Second one, with <|eot_id|> as text.\n"
                              "<|end_of_text|>Third.\n");
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 128001u), 3);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 128009u), 0) << "specials in documents are plain text";
    EXPECT_EQ(m["document_layout"], "each document is <|end_of_text|> followed by its tokens");

    auto j = nlohmann::json::parse(read_bytes(std::filesystem::path(dir) / "tokenizer.json"));
    j["post_processor"] = {{"type", "TemplateProcessing"},
                           {"single",
                            {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                             {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                           {"pair", nlohmann::json::array()},
                           {"special_tokens",
                            {{"<|begin_of_text|>",
                              {{"id", "<|begin_of_text|>"}, {"ids", {128000}}, {"tokens", {"<|begin_of_text|>"}}}}}}};
    write_bytes(d / "l31" / "tokenizer.json", j.dump());
    r = run(d, {"data", "prepare", "--input", (d / "docs.txt").string(), "--tokenizer", (d / "l31").string(), "--out",
                (d / "out31").string(), "--val-fraction", "0"});
    ASSERT_EQ(r.rc, 0) << r.err;
    auto [m31, ids31] = shard_ids(d / "out31");
    EXPECT_EQ(l3.decode(ids31), "<|begin_of_text|>First document.\n<|begin_of_text|>Second one, with <|eot_id|> as "
                                "text.\n<|begin_of_text|>Third.\n");
    EXPECT_EQ(std::count(ids31.begin(), ids31.end(), 128000u), 3);
    EXPECT_EQ(m31["document_layout"], "each document is <|begin_of_text|> followed by its tokens");
    EXPECT_EQ(m31["tokenizer"]["document_prefix"], nlohmann::json({128000}));
}

TEST(DataPrepare, ErrorsExitWithCode2AndNameFileAndLine) {
    TempDir d;
    auto expect_fail = [&](const std::vector<std::string>& extra, const std::string& what) {
        std::vector<std::string> args = {"data",   "prepare", "--tokenizer", kTokenizer, "--out", (d / "out").string(),
                                         "--quiet"};
        args.insert(args.end(), extra.begin(), extra.end());
        auto r = run(d, args);
        EXPECT_EQ(r.rc, 2) << r.err;
        EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    };
    expect_fail({"--input", (d / "missing.txt").string()}, "missing.txt");
    write_bytes(d / "bad.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"\n");
    expect_fail({"--input", (d / "bad.jsonl").string(), "--format", "jsonl"}, (d / "bad.jsonl").string() + ":2:");
    write_bytes(d / "nofield.jsonl", "{\"text\": \"a\"}\n\n{\"content\": \"b\"}\n");
    expect_fail({"--input", (d / "nofield.jsonl").string(), "--format", "jsonl"},
                (d / "nofield.jsonl").string() + ":3: no field \"text\"");
    write_bytes(d / "one.txt", "just one document\n");
    expect_fail({"--input", (d / "one.txt").string()}, "only 1 document");
    expect_fail({"--input", (d / "one.txt").string(), "--val-fraction", "1"}, "--val-fraction");
    expect_fail({"--input", (d / "one.txt").string(), "--format", "csv"}, "csv");
}

TEST(DataInspect, ChecksShardsDecodesThemAndRejectsCorruptOnes) {
    TempDir d;
    write_bytes(d / "a.txt", "hello world\n\nsecond document\n");
    auto r = run(d, {"data", "prepare", "--input", (d / "a.txt").string(), "--tokenizer", kTokenizer, "--out",
                     (d / "out").string(), "--val-fraction", "0", "--quiet"});
    ASSERT_EQ(r.rc, 0) << r.err;
    const std::string shard = (d / "out/train_000000.bin").string();
    r = run(d, {"data", "inspect", "--tokenizer", kTokenizer, "--decode", shard});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out, "<|endoftext|>hello world\n<|endoftext|>second document\n");
    r = run(d, {"data", "inspect", "--tokenizer", kTokenizer, "--json", shard});
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j[0]["eot_tokens"], 2);
    EXPECT_EQ(j[0]["token_bytes"], 2);
    // An id >= vocab in the last token: exit 2, the message names the file and the token's offset.
    std::string bytes = read_bytes(shard);
    const std::size_t last = bytes.size() - 2;
    bytes[last] = '\xff';
    bytes[last + 1] = '\xff';
    write_bytes(d / "bad.bin", bytes);
    r = run(d, {"data", "inspect", "--vocab-size", "50257", (d / "bad.bin").string()});
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_NE(r.err.find((d / "bad.bin").string() + ": at byte offset " + std::to_string(last) + ":"),
              std::string::npos)
        << r.err;
    write_bytes(d / "short.bin", bytes.substr(0, 1000));
    r = run(d, {"data", "inspect", "--vocab-size", "50257", (d / "short.bin").string()});
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_NE(r.err.find("at byte offset 1000:"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace llmt::data
