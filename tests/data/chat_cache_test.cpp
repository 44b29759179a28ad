// The chat cache (data/chat/chat_cache.h) with the real Llama 3 tokenizer and template: built once, read by a
// second open, rebuilt in a new directory when an input's content changes; malformed lines name file:line;
// the validation split.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "data/chat/chat_cache.h"
#include "data/test_files.h"

namespace llmt::data {
namespace {

using testing::TempDir;
using testing::write_bytes;

const std::string kLlama3Dir = LLMT_SOURCE_DIR "/data/tokenizers/llama3";

std::string conversations(int n, const std::string& answer = "Fine.") {
    std::string s;
    for (int i = 0; i < n; ++i)
        s += R"({"messages": [{"role": "user", "content": "How are you, )" + std::to_string(i) +
             R"(?"}, {"role": "assistant", "content": ")" + answer + R"("}]})" + "\n";
    return s;
}

TEST(ChatCache, ReusedThenInvalidatedByAnEditedInput) {
    TempDir tmp;
    write_bytes(tmp / "in/a.jsonl", conversations(6));
    write_bytes(tmp / "in/b.jsonl", R"({"prompt": "2+2?", "completion": "4"})" "\n");
    const ChatDataOptions o{{(tmp / "in").string()}, kLlama3Dir, tmp / "cache", 0.3, 1};
    const ChatData first = open_chat_data(o);
    EXPECT_FALSE(first.reused);
    EXPECT_EQ(first.examples->size(), 7u);
    EXPECT_EQ(first.train.size() + first.val.size(), 7u);
    EXPECT_FALSE(first.val.empty());
    EXPECT_EQ(first.pad_id, 128001u);  // <|end_of_text|>
    EXPECT_EQ(first.manifest["template"]["format"], "llama3");
    EXPECT_TRUE(std::filesystem::exists(first.dir / "examples.bin"));

    const ChatData second = open_chat_data(o);
    EXPECT_TRUE(second.reused);
    EXPECT_EQ(second.dir, first.dir);
    EXPECT_EQ(second.examples->tokens, first.examples->tokens);
    EXPECT_EQ(second.examples->assistant, first.examples->assistant);
    EXPECT_EQ(second.train, first.train);

    write_bytes(tmp / "in/a.jsonl", conversations(6, "Very well."));
    const ChatData edited = open_chat_data(o);
    EXPECT_FALSE(edited.reused);
    EXPECT_NE(edited.dir, first.dir);
    EXPECT_NE(edited.examples->tokens, first.examples->tokens);
}

TEST(ChatCache, MalformedLineNamesFileAndLine) {
    TempDir tmp;
    write_bytes(tmp / "a.jsonl", conversations(2) + R"({"messages": [{"role": "robot", "content": "x"}]})" "\n");
    try {
        (void)open_chat_data({{(tmp / "a.jsonl").string()}, kLlama3Dir, tmp / "cache", 0.0, 1});
        FAIL() << "a malformed line was accepted";
    } catch (const FormatError& e) {
        const std::string want = (tmp / "a.jsonl").string() + ":3: field \"messages[0].role\" is \"robot\"";
        EXPECT_EQ(std::string(e.what()).rfind(want, 0), 0u) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(tmp / "cache")) << "nothing is cached from a failed build";
}

TEST(ChatCache, TokenizerWithoutChatTemplateIsRefused) {
    TempDir tmp;
    write_bytes(tmp / "a.jsonl", conversations(2));
    EXPECT_THROW((void)open_chat_data({{(tmp / "a.jsonl").string()}, "gpt2", tmp / "cache", 0.0, 1}), InputError);
}

}  // namespace
}  // namespace llmt::data
