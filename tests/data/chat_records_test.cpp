// Chat JSONL records (data/chat/chat_records.h): both record forms, and every kind of malformed line is an
// error naming the file, the 1-based line and the field.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "data/chat/chat_records.h"

namespace llmt::data {
namespace {

// The FormatError message of parsing `text` as file "f.jsonl", or "" when it parses.
std::string error_of(const std::string& text) {
    try {
        (void)parse_chat_jsonl(text, "f.jsonl");
    } catch (const FormatError& e) {
        return e.what();
    }
    return "";
}

TEST(ChatRecords, MessagesAndPromptCompletion) {
    const std::string text =
        R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},)"
        R"( {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"},)"
        R"( {"role": "assistant", "content": "Bye."}], "id": 7})"
        "\r\n"
        R"({"prompt": "2+2?", "completion": "4"})";
    const auto recs = parse_chat_jsonl(text, "f.jsonl");
    ASSERT_EQ(recs.size(), 2u);
    EXPECT_EQ(recs[0].line, 1u);
    ASSERT_EQ(recs[0].messages.size(), 5u);
    EXPECT_EQ(recs[0].messages[4].role, "assistant");
    EXPECT_EQ(recs[0].messages[4].content, "Bye.");
    EXPECT_EQ(recs[1].line, 2u);
    ASSERT_EQ(recs[1].messages.size(), 2u);
    EXPECT_EQ(recs[1].messages[0].role, "user");
    EXPECT_EQ(recs[1].messages[0].content, "2+2?");
    EXPECT_EQ(recs[1].messages[1].role, "assistant");
    EXPECT_EQ(recs[1].messages[1].content, "4");
}

TEST(ChatRecords, MalformedLinesNameFileLineAndField) {
    const std::string good = R"({"prompt": "a", "completion": "b"})";
    struct Case {
        std::string line, want;
    } cases[] = {
        {"not json", "f.jsonl:2: "},
        {"", "f.jsonl:2: the line is empty"},
        {"[1, 2]", "f.jsonl:2: expected a JSON object"},
        {R"({"text": "x"})", "f.jsonl:2: field \"messages\" is missing"},
        {R"({"messages": "hi"})", "f.jsonl:2: field \"messages\" is \"hi\", expected a list"},
        {R"({"messages": []})", "f.jsonl:2: field \"messages\" is an empty list"},
        {R"({"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]})",
         "f.jsonl:2: field \"messages[1].role\" is \"bot\", expected system, user or assistant"},
        {R"({"messages": [{"role": "assistant"}]})", "f.jsonl:2: field \"messages[0].content\" is missing"},
        {R"({"messages": [{"role": "assistant", "content": 3}]})",
         "f.jsonl:2: field \"messages[0].content\" is 3, expected a string"},
        {R"({"messages": [{"role": "assistant", "content": "x", "weight": 0}]})",
         "f.jsonl:2: field \"messages[0].weight\" is not read"},
        {R"({"messages": [{"role": "user", "content": "a"}]})",
         "f.jsonl:2: field \"messages\" has no assistant message"},
        {R"({"prompt": "a"})", "f.jsonl:2: field \"completion\" is missing"},
        {R"({"prompt": "a", "completion": ["b"]})",
         "f.jsonl:2: field \"completion\" is an array of 1 element, expected a string"},
        {R"({"prompt": "  ", "completion": "b"})", "f.jsonl:2: field \"prompt\" is empty"},
        {R"({"prompt": "a", "completion": "b", "messages": []})",
         "f.jsonl:2: field \"messages\" and field \"prompt\""},
    };
    for (const auto& c : cases) {
        const std::string msg = error_of(good + "\n" + c.line + "\n" + good + "\n");
        EXPECT_EQ(msg.rfind(c.want, 0), 0u) << "line: " << c.line << "\nmessage: " << msg;
    }
    EXPECT_EQ(error_of(good + "\n" + good), "");  // no final newline: still two records
}

// The seeded, in-ctest version of tests/fuzz/chat_records_fuzz.cpp: valid lines with bytes flipped,
// inserted and cut give records or a FormatError naming the file, nothing else.
TEST(ChatRecords, MutatedLinesAreRecordsOrFormatErrors) {
    const std::string seed =
        R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},)"
        R"( {"role": "assistant", "content": "Hello."}]})"
        "\n"
        R"({"prompt": "2+2?", "completion": "4"})"
        "\n";
    uint64_t state = 42;
    auto next = [&] {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return static_cast<std::size_t>(state >> 33);
    };
    int errors = 0, parsed = 0;
    for (int round = 0; round < 3000; ++round) {
        std::string s = seed;
        for (int k = 0, n = 1 + static_cast<int>(next() % 4); k < n; ++k) {
            const std::size_t at = next() % s.size();
            switch (next() % 3) {
                case 0: s[at] = static_cast<char>(next() % 256); break;
                case 1: s.insert(at, 1, "\"{}[],:\\\n a0"[next() % 12]); break;
                default: s.erase(at, 1 + next() % 8); break;
            }
        }
        try {
            (void)parse_chat_jsonl(s, "m.jsonl");
            ++parsed;
        } catch (const FormatError& e) {
            ++errors;
            ASSERT_EQ(std::string(e.what()).rfind("m.jsonl:", 0), 0u) << e.what();
        }
    }
    EXPECT_GT(errors, 0);
    EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace llmt::data
