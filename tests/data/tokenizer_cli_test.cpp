// `llmtrain tokenize` / `llmtrain detokenize` end to end through the built binary ($LLMTRAIN_BIN):
// output formats, --allow-special, round trip, and exit code 2 with a message for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include "support/shell.h"
#include "support/subprocess.h"

namespace {

const std::string kTok = LLMT_SHARED_DIR "/data/gpt2.tiktoken";

using Result = llmt::testing::ShellResult;
using llmt::testing::run_shell;

std::string bin() { return llmt::testing::llmtrain_bin(); }

TEST(TokenizerCli, TokenizeFormatsAndSpecials) {
    const std::string in = "printf 'Hello world<|endoftext|>x' | " + bin() + " tokenize --tokenizer " + kTok;
    auto r = run_shell(in + " --json");
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(r.out, "[15496,995,27,91,437,1659,5239,91,29,87]\n");
    r = run_shell(in + " --allow-special --threads 2");
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(r.out, "15496\n995\n50256\n87\n");
    r = run_shell("printf '' | " + bin() + " tokenize --json --tokenizer " + kTok);
    EXPECT_EQ(r.out, "[]\n");
}

TEST(TokenizerCli, DetokenizeBothInputFormsAndRoundTrip) {
    auto r = run_shell("echo '[15496, 995, 50256]' | " + bin() + " detokenize --tokenizer " + kTok);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(r.out, "Hello world<|endoftext|>");
    r = run_shell("printf '15496\\n 995\\t13' | " + bin() + " detokenize --tokenizer " + kTok);
    EXPECT_EQ(r.out, "Hello world.");
    // Bytes that are not UTF-8 survive the round trip through the CLI too.
    r = run_shell("printf 'caf\\303\\251 \\377\\376 ok\\n' | " + bin() + " tokenize --tokenizer " + kTok + " | " +
                  bin() + " detokenize --tokenizer " + kTok + " | od -An -tx1 | tr -d ' \\n'");
    EXPECT_EQ(r.out, "636166c3a920fffe206f6b0a");
}

// A model directory's tokenizer.json (Llama 3's): no BOS/EOS added, specials only with --allow-special,
// ids from Hugging Face tokenizers (Hello=9906, " world"=1917, <|eot_id|>=128009), and back.
TEST(TokenizerCli, Llama3DirectoryBothWays) {
    const std::string dir = LLMT_SOURCE_DIR "/data/tokenizers/llama3";
    const std::string in = "printf 'Hello world<|eot_id|>' | " + bin() + " tokenize --tokenizer " + dir;
    auto r = run_shell(in + " --json");
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(r.out, "[9906,1917,27,91,68,354,851,91,29]\n");
    r = run_shell(in + "/tokenizer.json --json --allow-special");
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(r.out, "[9906,1917,128009]\n");
    r = run_shell("echo '[128000, 9906, 1917, 128009]' | " + bin() + " detokenize --tokenizer " + dir);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(r.out, "<|begin_of_text|>Hello world<|eot_id|>");
    r = run_shell("echo '128256' | " + bin() + " detokenize --tokenizer " + dir);
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.out.find("token id 128256 (at index 0)"), std::string::npos) << r.out;
}

TEST(TokenizerCli, BadInputExitsTwoWithAMessage) {
    auto r = run_shell("echo '15496 99999' | " + bin() + " detokenize --tokenizer " + kTok);
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.out.find("token id 99999 (at index 1)"), std::string::npos) << r.out;
    r = run_shell("echo '1 two' | " + bin() + " detokenize --tokenizer " + kTok);
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.out.find("\"two\""), std::string::npos) << r.out;
    r = run_shell("echo '[1,' | " + bin() + " detokenize --tokenizer " + kTok);
    EXPECT_EQ(r.rc, 2);
    r = run_shell("echo hi | " + bin() + " tokenize --tokenizer /nonexistent/x.tiktoken");
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.out.find("/nonexistent/x.tiktoken"), std::string::npos) << r.out;
}

}  // namespace
