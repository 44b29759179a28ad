// prepare_cached (src/data/shards/prepare_cache.h): the same inputs and options reuse the directory; a
// changed input file, option or tokenizer file gives another key; threads do not matter.
#include <gtest/gtest.h>

#include <thread>

#include "data/shards/prepare_cache.h"
#include "test_files.h"

namespace llmt::data {
namespace {

using testing::TempDir;
using testing::write_bytes;

TEST(PrepareCache, ReusesUntilInputsOrOptionsChange) {
    TempDir d;
    write_bytes(d / "in/a.txt", "one\n\ntwo\n\nthree\n");
    PrepareOptions o;
    o.inputs = {(d / "in").string()};
    o.tokenizer = LLMT_SHARED_DIR "/data/gpt2.tiktoken";
    o.val_fraction = 0.3;
    o.progress = false;
    const auto first = prepare_cached(o, d / "cache");
    EXPECT_FALSE(first.reused);
    EXPECT_TRUE(std::filesystem::exists(first.dir / "train_000000.bin"));
    EXPECT_EQ(first.manifest["splits"]["train"]["documents"].get<int>() +
                  first.manifest["splits"]["val"]["documents"].get<int>(),
              3);
    o.threads = 1;  // does not change the bytes, so not the key
    const auto again = prepare_cached(o, d / "cache");
    EXPECT_TRUE(again.reused);
    EXPECT_EQ(again.dir, first.dir);
    EXPECT_EQ(again.manifest, first.manifest);

    const std::string key = prepare_cache_key(o);
    o.seed = 1;
    EXPECT_NE(prepare_cache_key(o), key);
    o.seed = 0;
    o.corpus.doc_separator = "file";
    EXPECT_NE(prepare_cache_key(o), key);
    o.corpus.doc_separator = "blank";
    EXPECT_EQ(prepare_cache_key(o), key);
    // A new file in the input directory, or a rewritten one (size or mtime), changes the key.
    write_bytes(d / "in/b.txt", "four\n");
    EXPECT_NE(prepare_cache_key(o), key);
    std::filesystem::remove(d / "in/b.txt");
    EXPECT_EQ(prepare_cache_key(o), key);
    write_bytes(d / "in/a.txt", "one\n\ntwo\n\nthree!\n");
    const auto changed = prepare_cached(o, d / "cache");
    EXPECT_FALSE(changed.reused);
    EXPECT_NE(changed.dir, first.dir);
}

}  // namespace
}  // namespace llmt::data
