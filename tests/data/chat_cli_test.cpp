// `llmtrain data chat` and `llmtrain data chat-example` through the built binary ($LLMTRAIN_BIN): a
// malformed chat line is exit code 2 with a message naming the file and line; a good file is tokenized
// once, then reused.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "data/test_files.h"
#include "support/shell.h"
#include "support/subprocess.h"

namespace llmt::data {
namespace {

using testing::TempDir;
using testing::write_bytes;

const std::string kLlama3Dir = LLMT_SOURCE_DIR "/data/tokenizers/llama3";

using Result = llmt::testing::ShellResult;
using llmt::testing::run_shell;

std::string bin() { return llmt::testing::llmtrain_bin(); }

TEST(ChatCli, MalformedLineIsExit2NamingFileAndLine) {
    TempDir tmp;
    write_bytes(tmp / "chat.jsonl", R"({"prompt": "a", "completion": "b"})" "\n" R"({"prompt": "a"})" "\n");
    const Result r = run_shell(bin() + " data chat --input " + (tmp / "chat.jsonl").string() + " --tokenizer " +
                               kLlama3Dir + " --cache-dir " + (tmp / "cache").string());
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_NE(r.out.find((tmp / "chat.jsonl").string() + ":2: field \"completion\" is missing"), std::string::npos)
        << r.out;
}

TEST(ChatCli, TokenizesOnceThenReuses) {
    TempDir tmp;
    std::string text;
    for (int i = 0; i < 20; ++i)
        text += R"({"prompt": "Question )" + std::to_string(i) +
                R"(?", "completion": "Yes."})"
                "\n";
    write_bytes(tmp / "chat.jsonl", text);
    const std::string cmd = bin() + " data chat --input " + (tmp / "chat.jsonl").string() + " --tokenizer " +
                            kLlama3Dir + " --cache-dir " + (tmp / "cache").string() + " --block-size 64 --packing";
    Result r = run_shell(cmd);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("tokenized 20 conversations"), std::string::npos) << r.out;
    r = run_shell(cmd + " --json");
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("\"reused\":true"), std::string::npos) << r.out;
}

// The worked example's data, where the default corpus exists (make data): every line reads as chat.
TEST(ChatCli, ChatExampleFromTheCorpus) {
    const std::string corpus = LLMT_SOURCE_DIR "/data/corpus";
    if (!std::filesystem::exists(corpus + "/.complete")) GTEST_SKIP() << "no default corpus (make data)";
    TempDir tmp;
    const std::string out = (tmp / "qa.jsonl").string();
    Result r =
        run_shell(bin() + " data chat-example --corpus " + corpus + " --out " + out + " --conversations 300 --seed 3");
    ASSERT_EQ(r.rc, 0) << r.out;
    const std::string first = testing::read_bytes(out);
    r = run_shell(bin() + " data chat-example --corpus " + corpus + " --out " + out + " --conversations 300 --seed 3");
    EXPECT_EQ(testing::read_bytes(out), first) << "not deterministic";
    r = run_shell(bin() + " data chat --input " + out + " --tokenizer " + kLlama3Dir + " --cache-dir " +
           (tmp / "cache").string() + " --block-size 128");
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("tokenized 300 conversations"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("truncated"), std::string::npos) << "every example fits 129 tokens: " << r.out;
}

}  // namespace
}  // namespace llmt::data
