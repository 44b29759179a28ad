// Token shards (docs/formats/shards.md): header bytes exactly as documented, writer splitting,
// reader of llm.c and nanoGPT files, every corruption case -> FormatError naming file + byte offset,
// and a short in-process fuzz of the reader on random and mutated bytes.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/shards/corpus.h"
#include "data/shards/shard.h"
#include "data/shards/shard_set.h"
#include "data/shards/shard_writer.h"
#include "test_files.h"

namespace llmt::data {
namespace {

using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

int32_t i32_at(const std::string& b, std::size_t off) {
    int32_t v;
    std::memcpy(&v, b.data() + off, 4);
    return v;
}

std::string header(int32_t magic, int32_t version, int32_t count) {
    std::string h(kShardHeaderBytes, '\0');
    std::memcpy(h.data(), &magic, 4);
    std::memcpy(h.data() + 4, &version, 4);
    std::memcpy(h.data() + 8, &count, 4);
    return h;
}

std::string u16s(const std::vector<uint16_t>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 2);
}

std::vector<int32_t> read_all(const Shard& s) {
    std::vector<int32_t> out(s.size());
    s.read(0, s.size(), out.data());
    return out;
}

// Expects a FormatError whose message names the file and "byte offset <offset>".
template <class F>
void expect_format_error(F&& f, const std::filesystem::path& file, std::size_t offset) {
    try {
        f();
        ADD_FAILURE() << "expected a FormatError for " << file;
    } catch (const FormatError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
        EXPECT_NE(msg.find("byte offset " + std::to_string(offset) + ":"), std::string::npos) << msg;
    }
}

TEST(Shard, HeaderBytesU16ExactlyAsDocumented) {
    TempDir d;
    const std::vector<uint32_t> toks = {0, 1, 50256, 300, 65535};
    write_shard_file(d / "a.bin", toks, 65536);
    const std::string b = read_bytes(d / "a.bin");
    ASSERT_EQ(b.size(), 1024u + 2 * toks.size());
    EXPECT_EQ(i32_at(b, 0), 20240520);
    EXPECT_EQ(i32_at(b, 4), 1);
    EXPECT_EQ(i32_at(b, 8), 5);
    for (std::size_t off = 12; off < 1024; off += 4) ASSERT_EQ(i32_at(b, off), 0) << off;
    // little-endian uint16: 50256 = 0xC450 -> 50 C4
    EXPECT_EQ(static_cast<uint8_t>(b[1024 + 4]), 0x50);
    EXPECT_EQ(static_cast<uint8_t>(b[1024 + 5]), 0xC4);
    EXPECT_EQ(static_cast<uint8_t>(b[1024 + 8]), 0xFF);
    auto s = Shard::open(d / "a.bin", ShardFormat::kLlmc, 65536);
    EXPECT_EQ(s.token_bytes(), 2u);
    EXPECT_EQ(read_all(s), (std::vector<int32_t>{0, 1, 50256, 300, 65535}));
}

TEST(Shard, HeaderBytesU32ForLargeVocabularies) {
    TempDir d;
    const std::vector<uint32_t> toks = {128000, 5, 65536};
    write_shard_file(d / "a.bin", toks, 128256);
    const std::string b = read_bytes(d / "a.bin");
    ASSERT_EQ(b.size(), 1024u + 4 * toks.size());
    EXPECT_EQ(i32_at(b, 0), 20240801);
    EXPECT_EQ(i32_at(b, 4), 7);
    EXPECT_EQ(i32_at(b, 8), 3);
    EXPECT_EQ(i32_at(b, 1024), 128000);
    auto s = Shard::open(d / "a.bin", ShardFormat::kLlmc, 128256);
    EXPECT_EQ(s.token_bytes(), 4u);
    EXPECT_EQ(read_all(s), (std::vector<int32_t>{128000, 5, 65536}));
}

TEST(Shard, WriterSplitsAtShardTokensAndReadsBackInOrder) {
    TempDir d;
    std::vector<uint32_t> toks(12);
    std::iota(toks.begin(), toks.end(), 100u);
    ShardWriter w(d.path(), "train", 5, 50257);
    w.append(std::span(toks).subspan(0, 3));  // appends that straddle shard boundaries
    w.append(std::span(toks).subspan(3));
    const auto infos = w.finish();
    ASSERT_EQ(infos.size(), 3u);
    EXPECT_EQ(infos[0].file, "train_000000.bin");
    EXPECT_EQ(infos[2].file, "train_000002.bin");
    EXPECT_EQ(infos[0].tokens, 5u);
    EXPECT_EQ(infos[2].tokens, 2u);
    EXPECT_EQ(infos[2].bytes, 1024u + 4);
    ShardSet set(
        {(d / "train_000002.bin").string(), (d / "train_000000.bin").string(), (d / "train_000001.bin").string()},
        ShardFormat::kLlmc, 50257);
    ASSERT_EQ(set.size(), 12u);
    std::vector<int32_t> all(12);
    set.read(0, 12, all.data());  // sorted paths, so the given order does not matter
    for (int i = 0; i < 12; ++i) EXPECT_EQ(all[static_cast<std::size_t>(i)], 100 + i);
    std::vector<int32_t> mid(4);
    set.read(4, 4, mid.data());  // crosses the 0|1 shard boundary
    EXPECT_EQ(mid, (std::vector<int32_t>{104, 105, 106, 107}));
    // No temp files left behind.
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(d.path())) files += e.path().extension() == ".bin";
    EXPECT_EQ(files, 3);
}

TEST(Shard, EmptySplitWritesNoFile) {
    TempDir d;
    ShardWriter w(d.path(), "val", 10, 50257);
    EXPECT_TRUE(w.finish().empty());
    EXPECT_TRUE(std::filesystem::is_empty(d.path()));
}

TEST(Shard, WriterRejectsIdsOutsideVocabulary) {
    TempDir d;
    ShardWriter w(d.path(), "train", 10, 100);
    const uint32_t bad = 100;
    EXPECT_THROW(w.append(std::span<const uint32_t>(&bad, 1)), InputError);
}

TEST(Shard, NanoGptHeaderlessUint16) {
    TempDir d;
    write_bytes(d / "train.bin", u16s({7, 8, 9, 50256}));
    auto s = Shard::open(d / "train.bin", ShardFormat::kNanoGptU16, 50257);
    EXPECT_EQ(s.size(), 4u);
    EXPECT_EQ(s.data_offset(), 0u);
    EXPECT_EQ(read_all(s), (std::vector<int32_t>{7, 8, 9, 50256}));
    // The same bytes as an llm.c shard are too short for the header, and the message says why.
    try {
        Shard::open(d / "train.bin", ShardFormat::kLlmc, 50257);
        ADD_FAILURE();
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("nanogpt"), std::string::npos) << e.what();
    }
    write_bytes(d / "odd.bin", std::string(7, '\1'));
    expect_format_error([&] { Shard::open(d / "odd.bin", ShardFormat::kNanoGptU16, 50257); }, d / "odd.bin", 6);
    write_bytes(d / "empty.bin", "");
    EXPECT_EQ(Shard::open(d / "empty.bin", ShardFormat::kNanoGptU16, 50257).size(), 0u);
}

TEST(Shard, CorruptionCasesNameFileAndOffset) {
    TempDir d;
    const std::string good_tokens = u16s({1, 2, 3, 4});
    // Each file is refused by Shard::open, naming it and the offset where its content goes wrong.
    auto refused = [&](const char* name, const std::string& bytes, uint64_t offset) {
        write_bytes(d / name, bytes);
        expect_format_error([&] { Shard::open(d / name, ShardFormat::kLlmc, 50257); }, d / name, offset);
    };
    // Truncated inside the header: offset = where the file ends.
    refused("short.bin", header(20240520, 1, 4).substr(0, 100), 100);
    refused("zero.bin", "", 0);
    // Bad magic at 0, version not matching the magic at 4 (both magics).
    refused("magic.bin", header(12345, 1, 4) + good_tokens, 0);
    refused("ver16.bin", header(20240520, 7, 4) + good_tokens, 4);
    refused("ver32.bin", header(20240801, 1, 2) + good_tokens, 4);
    // Count disagreeing with the size: truncated token data, trailing bytes, negative count.
    refused("trunc.bin", header(20240520, 1, 5) + good_tokens, 8);
    refused("trail.bin", header(20240520, 1, 3) + good_tokens, 8);
    refused("neg.bin", header(20240520, 1, -1) + good_tokens, 8);
    // A token id >= vocab: found by read() and validate(), offset = that token's byte offset.
    write_bytes(d / "id.bin", header(20240520, 1, 4) + u16s({1, 2, 60000, 4}));
    auto s = Shard::open(d / "id.bin", ShardFormat::kLlmc, 50257);
    std::vector<int32_t> buf(4);
    EXPECT_NO_THROW(s.read(0, 2, buf.data()));  // the bad id is not in this window
    expect_format_error([&] { s.read(1, 3, buf.data()); }, d / "id.bin", 1024 + 2 * 2);
    expect_format_error([&] { s.validate(); }, d / "id.bin", 1024 + 2 * 2);
    write_bytes(d / "id.nano", u16s({1, 50257}));
    auto n = Shard::open(d / "id.nano", ShardFormat::kNanoGptU16, 50257);
    expect_format_error([&] { n.validate(); }, d / "id.nano", 2);
}

// A file named by mistake (a tokens file) is refused without printing its bytes, even as numbers.
TEST(Shard, BadMagicDoesNotPrintTheBytesFound) {
    TempDir d;
    write_bytes(d / "tokens", header(12345, 1, 4) + std::string(4096, 's'));
    try {
        Shard::open(d / "tokens", ShardFormat::kLlmc, 50257);
        ADD_FAILURE() << "accepted";
    } catch (const FormatError& e) {
        EXPECT_EQ(std::string(e.what()).find("12345"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("bad magic"), std::string::npos) << e.what();
    }
}

TEST(Shard, MissingFileIsIoErrorAndEmptyListIsInputError) {
    TempDir d;
    EXPECT_THROW(Shard::open(d / "nope.bin", ShardFormat::kLlmc, 50257), IoError);
    EXPECT_THROW(ShardSet({}, ShardFormat::kLlmc, 50257), InputError);
    EXPECT_THROW(parse_shard_format("numpy"), InputError);
}

// The reader must answer any byte string with success or a FormatError (never a crash, never another
// exception type); the fuzz/shard_fuzz.cpp libFuzzer target runs the same check for longer.
TEST(Shard, FuzzRandomAndMutatedBytes) {
    TempDir d;
    std::mt19937_64 rng(12345);
    std::vector<uint32_t> toks(64);
    for (auto& t : toks) t = static_cast<uint32_t>(rng() % 50257);
    write_shard_file(d / "seed.bin", toks, 50257);
    const std::string seed = read_bytes(d / "seed.bin");
    int ok = 0, rejected = 0;
    for (int iter = 0; iter < 600; ++iter) {
        std::string b;
        if (iter % 3 == 0) {  // random bytes of a random length, sometimes with a valid magic
            b.resize(rng() % 1200);
            for (auto& c : b) c = static_cast<char>(rng());
            if (b.size() >= 12 && rng() % 2) std::memcpy(b.data(), seed.data(), 12);
        } else {  // the valid shard with a few bytes flipped and maybe cut or extended
            b = seed;
            for (int k = 0, nflip = 1 + static_cast<int>(rng() % 4); k < nflip; ++k) {
                std::size_t pos = (rng() % 2) ? rng() % 12 : rng() % b.size();
                b[pos] = static_cast<char>(rng());
            }
            if (rng() % 4 == 0) b.resize(rng() % (b.size() + 8), '\x7f');
        }
        write_bytes(d / "f.bin", b);
        for (auto format : {ShardFormat::kLlmc, ShardFormat::kNanoGptU16}) {
            try {
                auto s = Shard::open(d / "f.bin", format, 50257);
                s.validate();
                ++ok;
            } catch (const FormatError&) {
                ++rejected;
            }
        }
    }
    // Both outcomes must occur, else the mutations are not reaching the checks.
    EXPECT_GT(ok, 30);
    EXPECT_GT(rejected, 30);
}

}  // namespace
}  // namespace llmt::data

namespace llmt::data {
namespace {

// A FIFO as a shard or a corpus input is refused at once (opening it would block until a writer
// appeared), naming the path and its type.
TEST(SpecialFiles, FifoShardAndCorpusInputAreRefused) {
    testing::TempDir d;
    const auto fifo = d / "train_000000.bin";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    auto message = [](auto&& f) {
        try {
            f();
        } catch (const InputError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(message([&] { Shard::open(fifo, ShardFormat::kLlmc, 65536); })
                  .find("is a FIFO (named pipe), expected a regular file (shard)"),
              std::string::npos);
    CorpusOptions o;
    o.doc_separator = "blank";
    EXPECT_NE(message([&] {
                  DocumentReader r(fifo, o);
              }).find("is a FIFO (named pipe), expected a regular file (corpus input)"),
              std::string::npos);
}

}  // namespace
}  // namespace llmt::data
