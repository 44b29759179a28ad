// Chat templates: Meta's Llama 3 tokenizer_config.json (data/tokenizers/llama3, the base model's
// template, which always ends with the assistant header), a Llama 3.1-style template, Python's strip,
// and the refusals (unknown template, no template, no bos_token).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "data/chat_configs.h"
#include "data/chat/chat_template.h"
#include "data/tokenizer/tokenizer.h"

namespace llmt::data {
namespace {

const std::string kLlama3Dir = LLMT_SOURCE_DIR "/data/tokenizers/llama3";

const std::vector<ChatMessage> kThreeTurns = {
    {"system", "You are a helpful assistant.\n"},
    {"user", "  What is the capital of France?  "},
    {"assistant", "Paris."},
    {"user", "And of Italy?\n\n"},
};

// What the template's statements give, written out by hand.
TEST(ChatTemplate, MetasLlama3TemplateRendersHeadersTrimmedContentAndEot) {
    const ChatTemplate t = ChatTemplate::load(kLlama3Dir + "/tokenizer_config.json");
    EXPECT_EQ(t.format(), ChatFormat::kLlama3);
    const std::string want =
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nWhat is the capital of France?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nParis.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nAnd of Italy?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n";
    EXPECT_EQ(t.render(kThreeTurns, true), want);
    // This (base model's) template has no add_generation_prompt condition: the header comes either way.
    EXPECT_EQ(t.render(kThreeTurns, false), want);
    // With special tokens recognised, the headers are single tokens.
    const Tokenizer tok = Tokenizer::load(kLlama3Dir);
    const auto ids = tok.encode(want, true);
    EXPECT_EQ(ids.front(), 128000u);                        // <|begin_of_text|>
    EXPECT_EQ(ids[1], tok.token_id("<|start_header_id|>"));  // 128006
    EXPECT_EQ(ids.back(), tok.token_id("\n\n"));
    EXPECT_EQ(std::count(ids.begin(), ids.end(), tok.token_id("<|eot_id|>")), 4);
    EXPECT_EQ(t.end_of_turn(), "<|eot_id|>");
}

TEST(ChatTemplate, Llama31SystemTurnWithPinnedOrConfiguredDate) {
    ChatTemplate t = ChatTemplate::parse(llama31_config(), "x/tokenizer_config.json");
    EXPECT_EQ(t.format(), ChatFormat::kLlama31);
    EXPECT_EQ(t.render({{"user", "Hi"}}, true),
              "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
              "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
    t.set_date_string("27 Nov 2026");
    EXPECT_EQ(
        t.render({{"system", " Be brief. "}, {"user", "Hi"}}, false),
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
        "Today Date: 27 Nov 2026\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

TEST(ChatTemplate, PythonStripIsUnicodeWhitespaceAndFileSeparators) {
    EXPECT_EQ(python_strip(" \t\n x y \r\n"), "x y");
    EXPECT_EQ(python_strip("\x1c\x1f\xc2\xa0\xe3\x80\x80x\xe2\x80\xa8"), "x");  // U+001C, U+001F, NBSP, U+3000, U+2028
    EXPECT_EQ(python_strip("\xef\xbb\xbfx"), "\xef\xbb\xbfx");                  // U+FEFF is not whitespace in Python
    EXPECT_EQ(python_strip(" \n "), "");
}

void expect_format_error(const std::string& json, const std::string& key) {
    try {
        ChatTemplate::parse(json, "m/tokenizer_config.json");
        ADD_FAILURE() << "parsed; expected a FormatError naming " << key;
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("m/tokenizer_config.json: " + key), std::string::npos) << e.what();
    }
}

TEST(ChatTemplate, RefusesUnknownTemplatesNamingFileAndKey) {
    // ChatML (Qwen and others): a different format, refused rather than rendered as Llama 3.
    expect_format_error(R"({"bos_token": "<s>", "chat_template": "{% for message in messages %}{{'<|im_start|>' + )"
                        R"(message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"})",
                        "chat_template");
    expect_format_error(R"({"bos_token": "<s>"})", "chat_template");
    expect_format_error(R"({"bos_token": "<s>", "chat_template": "x"})", "chat_template");
    expect_format_error(
        nlohmann::json({{"chat_template", nlohmann::json::parse(llama31_config())["chat_template"]}}).dump(),
        "bos_token");
    EXPECT_THROW(ChatTemplate::load("/nonexistent/tokenizer_config.json"), InputError);
    const ChatTemplate t = ChatTemplate::parse(llama31_config(), "x");
    EXPECT_THROW(t.render({}, true), InputError);
    EXPECT_THROW(t.render({{"tool", "x"}}, true), InputError);
}

}  // namespace
}  // namespace llmt::data
