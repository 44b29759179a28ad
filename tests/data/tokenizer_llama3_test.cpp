// The Llama 3 tokenizer (Meta's tokenizer.json, installed by scripts/setup.d/11-tokenizer-llama3.sh into
// data/tokenizers/llama3/) against Hugging Face `tokenizers` 0.23.2 (../shared/data, README there):
// every case of llama3_tokenizer_cases.jsonl with special tokens recognised (`ids`) and as plain text
// (`ids_ordinary`), decode(encode(x)) == x, and the whole reference corpus (corpus.llama3.tokens.u32le).
// Also the loader's refusals of tokenizer.json settings it does not implement, each naming the key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/fs.h"
#include "core/sha256.h"
#include "data/test_files.h"
#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/tokenizer_pretokenize.h"
#include "support/compare.h"
#include "tokenizer_corpus.h"

namespace llmt::data {
namespace {

const std::string& kShared = testing::kSharedData;
const std::string kLlama3Dir = LLMT_SOURCE_DIR "/data/tokenizers/llama3";

const Tokenizer& llama3() {
    static const Tokenizer tok = Tokenizer::load(kLlama3Dir);
    return tok;
}

using testing::show_ids;

TEST(TokenizerLlama3, FileIdentity) {
    EXPECT_EQ(llama3().source_sha256(), "c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78")
        << "run scripts/setup.sh (installs " << kLlama3Dir << ")";
    EXPECT_EQ(llama3().vocab_size(), 128256u);  // 128,000 BPE tokens + 256 special tokens
    EXPECT_EQ(llama3().special_tokens().size(), 256u);
    EXPECT_EQ(llama3().eot_token(), 128001u);  // <|end_of_text|>
    EXPECT_EQ(llama3().token_id("<|begin_of_text|>"), 128000u);
    EXPECT_EQ(llama3().token_id("<|eot_id|>"), 128009u);
    EXPECT_EQ(llama3().token_id("Hello"), 9906u);
    EXPECT_EQ(llama3().token_id("<|no_such_token|>"), 0xFFFFFFFFu);
    // This file's post-processor is ByteLevel: Hugging Face adds no BOS with add_special_tokens=True.
    EXPECT_TRUE(llama3().prefix_tokens().empty());
    EXPECT_TRUE(llama3().suffix_tokens().empty());
}

TEST(TokenizerLlama3, AllCasesBothWays) {
    std::ifstream in(kShared + "llama3_tokenizer_cases.jsonl");
    ASSERT_TRUE(in) << kShared << "llama3_tokenizer_cases.jsonl";
    std::string line;
    int n = 0, with_specials = 0;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        const auto c = nlohmann::json::parse(line);
        const std::string name = c["name"];
        const std::string text = c["text"];
        const auto want = c["ids"].get<std::vector<uint32_t>>();
        const auto want_ordinary = c["ids_ordinary"].get<std::vector<uint32_t>>();
        const auto got = llama3().encode(text, true);
        const auto got_ordinary = llama3().encode_ordinary(text);
        EXPECT_EQ(got, want) << "case " << name << " (specials recognised)\n got: " << show_ids(got)
                             << "\nwant: " << show_ids(want);
        EXPECT_EQ(got_ordinary, want_ordinary) << "case " << name << " (ordinary)\n got: " << show_ids(got_ordinary)
                                               << "\nwant: " << show_ids(want_ordinary);
        EXPECT_EQ(llama3().encode(text, false), want_ordinary) << "case " << name;
        EXPECT_EQ(llama3().decode(got), text) << "case " << name;
        EXPECT_EQ(llama3().decode(got_ordinary), text) << "case " << name;
        // The parallel encoder's cut points never change a token, specials or not.
        EXPECT_EQ(encode_parallel(llama3(), text, true, 2, 16), want) << "case " << name << " (parallel)";
        with_specials += want != want_ordinary;
        ++n;
    }
    EXPECT_EQ(n, 577);  // README: 577 cases; fewer means the file was not read whole
    EXPECT_EQ(with_specials, 4);  // the cases whose text holds a special token (the file has 4)
}

TEST(TokenizerLlama3, WholeCorpus) {
    const std::string text = testing::reference_corpus();
    const auto want = testing::reference_ids("corpus.llama3.tokens.u32le", 1807893);
    testing::expect_encodes_to(llama3(), text, want);
    // Small chunks: hundreds of cut points, none of which may change a token.
    testing::expect_same_ids(encode_parallel(llama3(), text, true, 2, 8 << 10), want);
}

// Pieces of the hand-written pre-tokenizer on the pattern's corners (expected from the regex by hand:
// each alternative in order, leftmost-first).
TEST(TokenizerLlama3, PretokenizerCorners) {
    auto pieces = [](std::string_view t) {
        const auto p = llama3_pretokenize(t);
        return std::vector<std::string>(p.begin(), p.end());
    };
    using V = std::vector<std::string>;
    EXPECT_EQ(pieces("it'S I'LL we'Re 'sa"), (V{"it", "'S", " I", "'LL", " we", "'Re", " '", "sa"}));
    EXPECT_EQ(pieces("x'\xC5\xBF"), (V{"x", "'\xC5\xBF"}));  // U+017F folds to s
    EXPECT_EQ(pieces("12345 1234567"), (V{"123", "45", " ", "123", "456", "7"}));
    EXPECT_EQ(pieces("(hello ((x"), (V{"(hello", " ((", "x"}));
    EXPECT_EQ(pieces("\thello\nworld"), (V{"\thello", "\n", "world"}));
    EXPECT_EQ(pieces("a!!\n\n b"), (V{"a", "!!\n\n", " b"}));
    EXPECT_EQ(pieces("a \n \n  b"), (V{"a", " \n \n", " ", " b"}));   // \s*[\r\n]+ ends at the last newline
    EXPECT_EQ(pieces("a   b  "), (V{"a", "  ", " b", "  "}));     // \s+(?!\S), then \s+ to the end
    EXPECT_EQ(pieces(" 1"), (V{" ", "1"}));
    EXPECT_EQ(pieces("\xFF\xFEx"), (V{"\xFF\xFE", "x"}));  // invalid bytes are "other" characters
    EXPECT_EQ(pieces("\xFFx"), (V{"\xFFx"}));
}

// Meta's tokenizer.json, to edit one key at a time.
nlohmann::json llama3_json() { return nlohmann::json::parse(read_file(kLlama3Dir + "/tokenizer.json")); }

void expect_refused(const nlohmann::json& j, const std::string& key_in_message) {
    testing::TempDir dir;
    const auto path = dir / "tokenizer.json";
    testing::write_bytes(path, j.dump());
    try {
        Tokenizer::load(path.string());
        ADD_FAILURE() << "loaded; expected a FormatError naming " << key_in_message;
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find(key_in_message), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
}

TEST(TokenizerLlama3, RefusesWhatItDoesNotImplementNamingTheKey) {
    const nlohmann::json base = llama3_json();
    {
        auto j = base;
        j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+|\\s+";
        expect_refused(j, "pre_tokenizer.pretokenizers[0].pattern.Regex");
    }
    {
        auto j = base;
        j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true;
        expect_refused(j, "pre_tokenizer.pretokenizers[1].use_regex");
    }
    {
        auto j = base;
        j["normalizer"] = {{"type", "NFC"}};
        expect_refused(j, "normalizer");
    }
    {
        auto j = base;
        j["model"]["byte_fallback"] = true;
        expect_refused(j, "model.byte_fallback");
    }
    {
        auto j = base;
        j["model"]["dropout"] = 0.1;
        expect_refused(j, "model.dropout");
    }
    {
        auto j = base;
        j["added_tokens"][3]["lstrip"] = true;
        expect_refused(j, "added_tokens[3].lstrip");
    }
    {
        auto j = base;
        j["post_processor"] = {{"type", "RobertaProcessing"}};
        expect_refused(j, "post_processor.type");
    }
    {
        auto j = base;
        j["model"]["merges"].push_back("Ġ Ġ");  // the first merge again
        expect_refused(j, "repeats model.merges[0]");
    }
    {
        auto j = base;
        j["model"]["merges"][5] = "xyzzy q";
        expect_refused(j, "model.merges[5]");
    }
}

// TemplateProcessing (Llama 3.1's post-processor) gives the BOS that training data starts documents with,
// and non-special added tokens are recognised even in ordinary text.
TEST(TokenizerLlama3, TemplatePostProcessorAndNonSpecialAddedTokens) {
    nlohmann::json j = llama3_json();
    j["post_processor"] = {
        {"type", "Sequence"},
        {"processors",
         {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}},
          {{"type", "TemplateProcessing"},
           {"single", {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                       {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
           {"pair", nlohmann::json::array()},
           {"special_tokens", {{"<|begin_of_text|>", {{"id", "<|begin_of_text|>"}, {"ids", {128000}},
                                                      {"tokens", {"<|begin_of_text|>"}}}}}}}}}};
    j["added_tokens"][2]["special"] = false;  // <|reserved_special_token_0|>, id 128002
    testing::TempDir dir;
    testing::write_bytes(dir / "tokenizer.json", j.dump());
    const Tokenizer tok = Tokenizer::load(dir.path().string());
    EXPECT_EQ(tok.prefix_tokens(), std::vector<uint32_t>{128000});
    EXPECT_TRUE(tok.suffix_tokens().empty());
    std::vector<uint32_t> want = llama3().encode_ordinary("a");
    want.push_back(128002);
    for (uint32_t id : llama3().encode_ordinary("b<|eot_id|>")) want.push_back(id);
    EXPECT_EQ(tok.encode_ordinary("a<|reserved_special_token_0|>b<|eot_id|>"), want);
    EXPECT_EQ(tok.encode("<|begin_of_text|>x", true), (std::vector<uint32_t>{128000, 87}));
}

}  // namespace
}  // namespace llmt::data
