// Chat data from Hugging Face dataset files through the binary ($LLMTRAIN_BIN): `llmtrain data chat`
// on a `messages` or prompt/completion column (Parquet from pyarrow and hyparquet-writer, Arrow IPC,
// save_to_disk and hub cache folders) tokenizes to the same examples, byte for byte, as the same
// conversations in chat JSONL; a bad row is exit 2 naming the file and row.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "data/test_files.h"
#include "support/shell.h"
#include "support/subprocess.h"

namespace llmt::data {
namespace {

namespace fs = std::filesystem;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

const std::string kLlama3Dir = LLMT_SOURCE_DIR "/data/tokenizers/llama3";
const fs::path kFixtures = fs::path(LLMT_SOURCE_DIR) / "tests/data/fixtures/hf";

using Result = llmt::testing::ShellResult;
using llmt::testing::run_shell;

std::string bin() { return llmt::testing::llmtrain_bin(); }

// `data chat --json` on `input`; returns the report and the examples.bin the cache holds.
std::pair<nlohmann::json, std::string> chat(const TempDir& tmp, const fs::path& input) {
    const Result r =
        run_shell(bin() + " data chat --input '" + input.string() + "' --tokenizer " + kLlama3Dir + " --cache-dir " +
                  (tmp / "cache").string() + " --val-fraction 0.2 --seed 4 --block-size 96 --json");
    EXPECT_EQ(r.rc, 0) << r.out;
    if (r.rc != 0) return {};
    auto j = nlohmann::json::parse(r.out);
    const std::string examples = read_bytes(fs::path(j["cache_dir"].get<std::string>()) / "examples.bin");
    return {j, examples};
}

void expect_same_as_jsonl(const TempDir& tmp, const fs::path& input, const fs::path& jsonl) {
    SCOPED_TRACE(input.string());
    auto [a, ea] = chat(tmp, input);
    auto [b, eb] = chat(tmp, jsonl);
    ASSERT_FALSE(a.is_null());
    ASSERT_FALSE(b.is_null());
    EXPECT_GT(a["examples"].get<int>(), 10);
    for (const char* k : {"examples", "tokens", "train", "val"}) EXPECT_EQ(a[k], b[k]) << k;
    EXPECT_EQ(ea, eb) << "examples.bin differs";
}

TEST(HfChat, PyarrowMessagesAndPromptCompletionEqualJsonl) {
    TempDir tmp;
    const fs::path chat_jsonl = kFixtures / "chat/expected_chat.jsonl";
    for (const char* f :
         {"chat/messages_snappy_v1.parquet", "chat/messages_zstd_v2.parquet", "chat/messages_none_v1_plain.parquet",
          "arrow/messages.stream.arrow", "save_to_disk/chat", "hub/datasets--testorg--chat"}) {
        expect_same_as_jsonl(tmp, kFixtures / f, chat_jsonl);
    }
    expect_same_as_jsonl(tmp, kFixtures / "chat/prompt_completion.parquet",
                         kFixtures / "chat/expected_prompt_completion.jsonl");
}

TEST(HfChat, HyparquetAndApacheArrowMessagesEqualJsonl) {
    TempDir tmp;
    const fs::path writer = fs::path(LLMT_SOURCE_DIR) / "tests/data/hf_writer";
    ASSERT_TRUE(fs::exists(writer / "node_modules/hyparquet-writer"))
        << "run scripts/setup.sh (setup.d/61-hf-writers.sh)";
    ASSERT_EQ(
        std::system(
            ("cd '" + writer.string() + "' && node write.mjs '" + (tmp / "w").string() + "' >/dev/null").c_str()),
        0);
    for (const char* f : {"chat", "arrow/messages.stream.arrow", "saved_chat"})
        expect_same_as_jsonl(tmp, tmp / "w" / f, tmp / "w/chat.jsonl");
}

TEST(HfChat, BadRowOrMissingColumnsIsExit2NamingFileAndRow) {
    TempDir tmp;
    // A text-only file has neither messages nor prompt/completion.
    Result r = run_shell(bin() + " data chat --input " + (kFixtures / "parquet/plain_none_v1.parquet").string() +
                         " --tokenizer " + kLlama3Dir + " --cache-dir " + (tmp / "cache").string());
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_NE(r.out.find("neither a 'messages' column nor 'prompt' and 'completion' columns (columns: id, text)"),
              std::string::npos)
        << r.out;
}

}  // namespace
}  // namespace llmt::data
