// Hugging Face datasets as `data prepare --format hf` input, through the real binary (LLMTRAIN_BIN):
// Parquet and Arrow IPC files written by independent writers (hyparquet-writer and apache-arrow, run
// by node from tests/data/hf_writer/write.mjs; pyarrow's files under tests/data/fixtures/hf) give
// token shards equal byte for byte to the same documents as JSONL; splits, configs, save_to_disk and
// hub cache folders; and malformed files (cut footer, cut page, wrong magic, huge declared page size,
// zstd bomb, wrong column type) exit 2 naming the file and a byte offset, in under 100 MB of memory.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "parquet_craft.h"
#include "test_files.h"

namespace llmt::data {
namespace {

namespace fs = std::filesystem;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

// The GPT-2 ranks scripts/setup.d/10-tokenizer.sh installs in the checkout.
const std::string kTokenizer = LLMT_SOURCE_DIR "/data/tokenizers/gpt2.tiktoken";
const fs::path kSource = LLMT_SOURCE_DIR;
const fs::path kFixtures = kSource / "tests/data/fixtures/hf";

struct Result {
    int rc = -1;
    std::string out, err;
    long max_rss_kb = 0;  // the child's peak resident memory
};

// Runs llmtrain with `args` in a child of its own, so that wait4 reports that child's peak memory.
Result run(const fs::path& dir, const std::vector<std::string>& args) {
    const char* bin = std::getenv("LLMTRAIN_BIN");
    EXPECT_NE(bin, nullptr) << "LLMTRAIN_BIN is not set (ctest sets it)";
    const fs::path out = dir / "stdout", err = dir / "stderr";
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(err.c_str(), "w", stderr)) _exit(127);
        std::vector<char*> argv{const_cast<char*>(bin)};
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(bin, argv.data());
        _exit(127);
    }
    int status = 0;
    struct rusage ru {};
    ::wait4(pid, &status, 0, &ru);
    Result r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_bytes(out);
    r.err = read_bytes(err);
    r.max_rss_kb = ru.ru_maxrss;
    return r;
}

// Files the independent writers produce, written once for the whole suite.
class HfDataset : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir();
        const fs::path writer = kSource / "tests/data/hf_writer";
        ASSERT_TRUE(fs::exists(writer / "node_modules/hyparquet-writer"))
            << "run scripts/setup.sh (setup.d/61-hf-writers.sh)";
        const std::string cmd =
            "cd '" + writer.string() + "' && node write.mjs '" + (dir_->path() / "w").string() + "' >/dev/null";
        ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    static fs::path w(const std::string& rel) { return dir_->path() / "w" / rel; }

    // Prepares `input` (extra args appended) and `jsonl`, and expects identical shard files.
    void expect_same_shards(const std::vector<std::string>& hf_args, const fs::path& jsonl,
                            double val_fraction = 0.2) {
        const std::string vf = std::to_string(val_fraction);
        std::vector<std::string> common = {"--tokenizer",    kTokenizer, "--val-fraction", vf, "--seed", "5",
                                           "--shard-tokens", "700",      "--quiet"};
        std::vector<std::string> a = {"data", "prepare", "--format", "hf", "--out", (tmp_.path() / "hf").string()};
        a.insert(a.end(), hf_args.begin(), hf_args.end());
        a.insert(a.end(), common.begin(), common.end());
        Result r = run(tmp_.path(), a);
        ASSERT_EQ(r.rc, 0) << r.err;
        std::vector<std::string> b = {"data",    "prepare",      "--format", "jsonl",
                                      "--input", jsonl.string(), "--out",    (tmp_.path() / "jsonl").string()};
        b.insert(b.end(), common.begin(), common.end());
        r = run(tmp_.path(), b);
        ASSERT_EQ(r.rc, 0) << r.err;
        const auto m = nlohmann::json::parse(read_bytes(tmp_.path() / "hf/manifest.json"));
        const auto j = nlohmann::json::parse(read_bytes(tmp_.path() / "jsonl/manifest.json"));
        EXPECT_EQ(m["splits"], j["splits"]);
        EXPECT_EQ(m["options"]["format"], "hf");
        std::size_t files = 0;
        for (const char* split : {"train", "val"}) {
            for (const auto& sh : j["splits"][split]["shards"]) {
                const std::string name = sh["file"].get<std::string>();
                EXPECT_EQ(read_bytes(tmp_.path() / "hf" / name), read_bytes(tmp_.path() / "jsonl" / name)) << name;
                ++files;
            }
        }
        EXPECT_GE(files, 1u);
        if (val_fraction > 0) {
            EXPECT_GT(j["splits"]["val"]["documents"].get<int>(), 0);
        }
    }

    static TempDir* dir_;
    TempDir tmp_;
};
TempDir* HfDataset::dir_ = nullptr;

TEST_F(HfDataset, ParquetEachCodecAndEncodingEqualsJsonl) {
    for (const char* name :
         {"snappy_dict", "none_plain", "gzip_plain", "gzip_dict", "snappy_delta_length", "none_delta_bytes"}) {
        SCOPED_TRACE(name);
        expect_same_shards({"--input", w(std::string("parquet/") + name + ".parquet").string()}, w("docs.jsonl"));
    }
}

TEST_F(HfDataset, ArrowStreamAndFileStringAndLargeStringEqualJsonl) {
    for (const char* file : {"arrow/rich.stream.arrow", "arrow/rich.file.arrow"}) {
        for (const char* field : {"text", "big"}) {
            SCOPED_TRACE(std::string(file) + " " + field);
            expect_same_shards({"--input", w(file).string(), "--text-field", field}, w("docs.jsonl"));
        }
    }
}

TEST_F(HfDataset, SaveToDiskDirectoriesAndSplits) {
    expect_same_shards({"--input", w("saved").string()}, w("docs.jsonl"));
    expect_same_shards({"--input", w("saved_dict").string()}, w("docs.jsonl"));
    // --split only picks the documents: with --val-fraction 0 they all go to train_*.bin.
    expect_same_shards({"--input", w("saved_dict").string(), "--split", "validation"}, w("val_docs.jsonl"), 0);
    EXPECT_TRUE(fs::exists(tmp_.path() / "hf/train_000000.bin"));
    const Result r =
        run(tmp_.path(), {"data", "prepare", "--format", "hf", "--input", w("saved_dict").string(), "--split", "test",
                          "--tokenizer", kTokenizer, "--out", (tmp_.path() / "x").string()});
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("no split 'test' (splits found: train, validation)"), std::string::npos) << r.err;
}

TEST_F(HfDataset, HubCacheFolderResolvesRefsAndSplits) {
    const fs::path repo = w("hub/datasets--testorg--tiny");
    // refs/main -> snapshots/<sha>; the two train shards in name order, symlinks into blobs/ followed.
    expect_same_shards({"--input", repo.string()}, w("docs.jsonl"));
    expect_same_shards({"--input", repo.string(), "--split", "validation"}, w("val_docs.jsonl"));
    Result r = run(tmp_.path(), {"data", "prepare", "--format", "hf", "--input", repo.string(), "--split", "dev",
                                 "--tokenizer", kTokenizer, "--out", (tmp_.path() / "x").string()});
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("no split 'dev' (splits found: train, validation)"), std::string::npos) << r.err;
    r = run(tmp_.path(), {"data", "prepare", "--format", "hf", "--input", repo.string(), "--revision", "v9",
                          "--tokenizer", kTokenizer, "--out", (tmp_.path() / "x").string()});
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(
        r.err.find(
            "has no revision 'v9' (revisions found: refs: main; snapshots: 0123456789abcdef0123456789abcdef01234567)"),
        std::string::npos)
        << r.err;
    // A snapshot file that links out of the cache folder is refused.
    const fs::path evil = tmp_.path() / "datasets--evil--x";
    fs::create_directories(evil / "refs");
    fs::create_directories(evil / "snapshots/abc/data");
    write_bytes(evil / "refs/main", "abc");
    fs::create_symlink(w("parquet/gzip_dict.parquet"), evil / "snapshots/abc/data/train-00000-of-00001.parquet");
    r = run(tmp_.path(), {"data", "prepare", "--format", "hf", "--input", evil.string(), "--tokenizer", kTokenizer,
                          "--out", (tmp_.path() / "x").string()});
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("outside the hub cache folder"), std::string::npos) << r.err;
    // An explicit commit hash names the snapshot directly.
    expect_same_shards({"--input", repo.string(), "--revision", "0123456789abcdef0123456789abcdef01234567"},
                       w("docs.jsonl"));
}

// --revision (data.revision) picks another snapshot by branch or tag; a snapshot named directly works
// without it; a revision with no hub cache folder to apply to is refused, never ignored.
TEST_F(HfDataset, RevisionsPickSnapshotsAndAreNeverIgnored) {
    const fs::path repo = tmp_.path() / "datasets--testorg--tiny";
    fs::copy(w("hub/datasets--testorg--tiny"), repo, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    const std::string main_sha = "0123456789abcdef0123456789abcdef01234567",
                      old_sha = "89abcdef0123456789abcdef0123456789abcdef";
    // Tag `old`: a snapshot whose train split is main's validation file (a link to a link, both inside).
    fs::create_directories(repo / "snapshots" / old_sha / "data");
    fs::create_symlink("../../" + main_sha + "/data/validation-00000-of-00001.parquet",
                       repo / "snapshots" / old_sha / "data/train-00000-of-00001.parquet");
    write_bytes(repo / "refs/old", old_sha);
    expect_same_shards({"--input", repo.string(), "--revision", "old"}, w("val_docs.jsonl"));
    expect_same_shards({"--input", (repo / "snapshots" / old_sha).string()}, w("val_docs.jsonl"));
    expect_same_shards({"--input", (repo / "snapshots" / old_sha).string(), "--revision", "old"}, w("val_docs.jsonl"));
    Result r =
        run(tmp_.path(), {"data", "prepare", "--format", "hf", "--input", (repo / "snapshots" / old_sha).string(),
                          "--revision", main_sha, "--tokenizer", kTokenizer, "--out", (tmp_.path() / "x").string()});
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("is in another snapshot than revision '" + main_sha + "'"), std::string::npos) << r.err;
    r = run(tmp_.path(), {"data", "prepare", "--format", "hf", "--input", repo.string(), "--revision", "v2",
                          "--tokenizer", kTokenizer, "--out", (tmp_.path() / "x").string()});
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("has no revision 'v2' (revisions found: refs: main, old; snapshots: " + main_sha + ", " +
                         old_sha + ")"),
              std::string::npos)
        << r.err;
    r = run(tmp_.path(), {"data", "prepare", "--format", "hf", "--input", w("parquet/gzip_dict.parquet").string(),
                          "--revision", "old", "--tokenizer", kTokenizer, "--out", (tmp_.path() / "x").string()});
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("data.revision (--revision) 'old' selects a snapshot of a hub cache folder"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(tmp_.path() / "x/manifest.json"));
}

// A tokenizer given as a hub cache folder (models--ORG--NAME) is its snapshot's tokenizer.json.
TEST_F(HfDataset, TokenizerFromHubCacheFolder) {
    const fs::path llama3 = kSource / "data/tokenizers/llama3";
    const fs::path repo = tmp_.path() / "models--testorg--tok";
    const std::string sha = "00112233445566778899aabbccddeeff00112233";
    fs::create_directories(repo / "refs");
    fs::create_directories(repo / "blobs");
    fs::create_directories(repo / "snapshots" / sha);
    write_bytes(repo / "refs/main", sha + "\n");
    fs::copy_file(llama3 / "tokenizer.json", repo / "blobs/b1");
    fs::create_symlink("../../blobs/b1", repo / "snapshots" / sha / "tokenizer.json");
    std::vector<std::string> common = {
        "data", "prepare", "--format", "hf", "--input", w("parquet/gzip_dict.parquet").string(), "--quiet"};
    auto a = common, b = common;
    a.insert(a.end(), {"--tokenizer", repo.string(), "--out", (tmp_.path() / "a").string()});
    b.insert(b.end(), {"--tokenizer", llama3.string(), "--out", (tmp_.path() / "b").string()});
    Result r = run(tmp_.path(), a);
    ASSERT_EQ(r.rc, 0) << r.err;
    r = run(tmp_.path(), b);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(read_bytes(tmp_.path() / "a/train_000000.bin"), read_bytes(tmp_.path() / "b/train_000000.bin"));
    EXPECT_EQ(nlohmann::json::parse(read_bytes(tmp_.path() / "a/manifest.json"))["token_dtype"], "uint32");
    // --tokenizer-revision: a tag of the tokenizer's folder; one that is not there names those that are;
    // one with no hub cache tokenizer is refused.
    write_bytes(repo / "refs/v1", sha);
    auto c = common;
    c.insert(c.end(),
             {"--tokenizer", repo.string(), "--tokenizer-revision", "v1", "--out", (tmp_.path() / "c").string()});
    r = run(tmp_.path(), c);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(read_bytes(tmp_.path() / "a/train_000000.bin"), read_bytes(tmp_.path() / "c/train_000000.bin"));
    c.back() = (tmp_.path() / "d").string();
    c[c.size() - 3] = "v2";
    r = run(tmp_.path(), c);
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("has no revision 'v2' (revisions found: refs: main, v1; snapshots: " + sha + ")"),
              std::string::npos)
        << r.err;
    b.insert(b.end(), {"--tokenizer-revision", "v1"});
    r = run(tmp_.path(), b);
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("--tokenizer-revision 'v1' selects a snapshot of a hub cache folder"), std::string::npos)
        << r.err;
}

TEST_F(HfDataset, ConfigFoldersAreChosenByName) {
    const fs::path repo = w("hub/datasets--testorg--configs");
    Result r = run(tmp_.path(), {"data", "prepare", "--format", "hf", "--input", repo.string(), "--tokenizer",
                                 kTokenizer, "--out", (tmp_.path() / "x").string()});
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("several configs (main_cfg, other)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--config-name"), std::string::npos) << r.err;
    expect_same_shards({"--input", repo.string(), "--config-name", "main_cfg"}, w("docs.jsonl"));
    r = run(tmp_.path(), {"data", "prepare", "--format", "hf", "--input", repo.string(), "--config-name", "nope",
                          "--tokenizer", kTokenizer, "--out", (tmp_.path() / "x").string()});
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("no config 'nope' (configs: main_cfg, other)"), std::string::npos) << r.err;
}

TEST_F(HfDataset, WrongColumnTypeOrNameNamesFileColumnAndOffset) {
    const std::vector<std::pair<fs::path, std::string>> cases = {{w("int_text.parquet"), "text"},
                                                                 {kFixtures / "parquet/text_int64.parquet", "text"},
                                                                 {w("arrow/rich.file.arrow"), "n32"},
                                                                 {w("arrow/rich.stream.arrow"), "meta"}};
    for (const auto& [file, field] : cases) {
        const Result r =
            run(tmp_.path(), {"data", "prepare", "--format", "hf", "--input", file.string(), "--text-field", field,
                              "--tokenizer", kTokenizer, "--out", (tmp_.path() / "x").string()});
        EXPECT_EQ(r.rc, 2) << file;
        EXPECT_LT(r.max_rss_kb, 100 * 1024) << r.err;  // as for the malformed files below
        EXPECT_NE(r.err.find(file.string() + ": byte offset "), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("column '" + field + "' is "), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("expected a string"), std::string::npos) << r.err;
    }
    const Result r =
        run(tmp_.path(), {"data", "prepare", "--format", "hf", "--input", w("parquet/gzip_dict.parquet").string(),
                          "--text-field", "body", "--tokenizer", kTokenizer, "--out", (tmp_.path() / "x").string()});
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("no column 'body' (columns: id, text)"), std::string::npos) << r.err;
}

// pyarrow's files (tests/data/fixtures/hf, written by make_fixtures.py there).
TEST_F(HfDataset, PyarrowParquetEveryCodecPageVersionAndEncodingEqualsJsonl) {
    const auto manifest = nlohmann::json::parse(read_bytes(kFixtures / "manifest.json"));
    ASSERT_GE(manifest["parquet"].size(), 10u);
    for (const auto& f : manifest["parquet"]) {
        SCOPED_TRACE(f.dump());
        EXPECT_GT(f["row_groups"].get<int>(), 1);
        expect_same_shards({"--input", (kFixtures / f["file"].get<std::string>()).string()},
                           kFixtures / f["expected"].get<std::string>());
    }
}

TEST_F(HfDataset, PyarrowArrowSaveToDiskAndHubFoldersEqualJsonl) {
    const fs::path expected = kFixtures / "parquet/expected.jsonl";
    for (const char* file : {"arrow/rich.stream.arrow", "arrow/rich.file.arrow"}) {
        for (const char* field : {"text", "big"}) {
            SCOPED_TRACE(std::string(file) + " " + field);
            expect_same_shards({"--input", (kFixtures / file).string(), "--text-field", field}, expected);
        }
    }
    expect_same_shards({"--input", (kFixtures / "save_to_disk/dataset").string()}, expected);
    expect_same_shards({"--input", (kFixtures / "save_to_disk/dataset_dict").string(), "--split", "validation"},
                       kFixtures / "save_to_disk/expected_validation.jsonl");
    expect_same_shards({"--input", (kFixtures / "hub/datasets--testorg--tiny").string()}, expected);
    // No data/ folder: the `default` config is the default.
    expect_same_shards({"--input", (kFixtures / "hub/datasets--testorg--configs").string()}, expected);
    expect_same_shards({"--input", (kFixtures / "hub/datasets--testorg--configs").string(), "--config-name", "alt"},
                       kFixtures / "save_to_disk/expected_validation.jsonl");
}

TEST_F(HfDataset, NullAndEmptyValuesAreSkipped) {
    write_bytes(tmp_.path() / "nulls.jsonl", "{\"text\": \"a\"}\n{\"text\": \"c\"}\n{\"text\": \"f\"}\n");
    expect_same_shards({"--input", (kFixtures / "parquet/text_nulls.parquet").string()}, tmp_.path() / "nulls.jsonl",
                       0);
}

// A zstd frame of `n` zero bytes: RLE blocks of 4 bytes per 128 KiB, so a few KB for hundreds of MB.
std::string zstd_zeros(std::size_t n) {
    ZSTD_CCtx* c = ZSTD_createCCtx();
    std::string out;
    std::vector<char> zeros(1 << 16, 0), buf(ZSTD_CStreamOutSize());
    for (std::size_t done = 0; done <= n;) {
        const std::size_t take = std::min(zeros.size(), n - done);
        const bool last = done + take == n;
        ZSTD_inBuffer in{zeros.data(), take, 0};
        for (;;) {
            ZSTD_outBuffer o{buf.data(), buf.size(), 0};
            const std::size_t left = ZSTD_compressStream2(c, &o, &in, last ? ZSTD_e_end : ZSTD_e_continue);
            out.append(buf.data(), o.pos);
            if (last ? left == 0 : in.pos == in.size) break;
        }
        done += take;
        if (last) break;
    }
    ZSTD_freeCCtx(c);
    return out;
}

TEST_F(HfDataset, MalformedParquetExitsTwoWithFileAndOffsetInBoundedMemory) {
    const std::string good = read_bytes(w("parquet/none_plain.parquet"));
    std::vector<std::pair<std::string, std::string>> files;  // name, bytes
    std::string magic = good;
    magic[1] = 'X';
    files.push_back({"wrong_magic.parquet", magic});
    files.push_back({"footer_cut.parquet", good.substr(0, good.size() - 40)});
    // Page cut: the data stops inside the first page, the footer is still there.
    const uint32_t footer_len = *reinterpret_cast<const uint32_t*>(good.data() + good.size() - 8);
    const std::string footer = good.substr(good.size() - 8 - footer_len);
    files.push_back({"page_cut.parquet", good.substr(0, 60) + footer});
    // A page that declares 2 GB uncompressed, and one whose 3 KB of zstd inflate to 256 MiB.
    const std::string body = testing::plain_page_body({"hello", "world"});
    files.push_back({"huge_page.parquet", testing::craft_parquet({0, body, int64_t{2000000000}, 2})});
    files.push_back({"zstd_bomb.parquet",
                     testing::craft_parquet({6, zstd_zeros(std::size_t{256} << 20), int64_t(body.size()), 2})});
    files.push_back({"snappy_lies.parquet", testing::craft_parquet({1, std::string("\x80\x80\x80\x80\x07", 5) + "abc",
                                                                    int64_t{1} << 30, 2})});
    for (const auto& [name, bytes] : files) {
        SCOPED_TRACE(name);
        const fs::path p = tmp_.path() / name;
        write_bytes(p, bytes);
        const Result r = run(tmp_.path(), {"data", "prepare", "--format", "hf", "--input", p.string(), "--tokenizer",
                                           kTokenizer, "--out", (tmp_.path() / "x").string(), "--quiet"});
        EXPECT_EQ(r.rc, 2) << r.err;
        EXPECT_NE(r.err.find(p.string() + ":"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("byte offset"), std::string::npos) << r.err;
        // The tokenizer and binary take ~40 MB; a reader that trusted a declared size would take GBs.
        EXPECT_LT(r.max_rss_kb, 100 * 1024) << r.err;
        EXPECT_FALSE(fs::exists(tmp_.path() / "x/manifest.json"));
    }
    // The crafted file itself is valid when it tells the truth.
    const fs::path ok = tmp_.path() / "crafted_ok.parquet";
    write_bytes(ok, testing::craft_parquet({0, body, -1, 2}));
    const Result r =
        run(tmp_.path(), {"data", "prepare", "--format", "hf", "--input", ok.string(), "--tokenizer", kTokenizer,
                          "--out", (tmp_.path() / "x").string(), "--val-fraction", "0", "--quiet", "--json"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["splits"]["train"]["documents"], 2);
}

}  // namespace
}  // namespace llmt::data
