// Corpus readers (src/data/shards/corpus.h): what a document is for text (blank / file / separator line)
// and JSONL inputs, gzip (multi-member, truncated, corrupt), directory expansion, raw-byte hashing,
// and errors that name file and line.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"
#include "data/shards/corpus.h"
#include "test_files.h"

namespace llmt::data {
namespace {

using testing::gzip;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

std::vector<std::string> docs_of(const std::filesystem::path& p, const CorpusOptions& o) {
    DocumentReader r(p, o);
    std::vector<std::string> out;
    std::string d;
    while (r.next(d)) out.push_back(d);
    return out;
}

CorpusOptions text(const std::string& sep = "blank") {
    CorpusOptions o;
    o.doc_separator = sep;
    return o;
}

TEST(Corpus, BlankLinesSeparateDocumentsAndLinesStayVerbatim) {
    TempDir d;
    write_bytes(d / "a.txt", "\n\nFirst doc line 1\nline 2\n\n \t\n\nSecond\r\nwith CRLF\r\n\r\nlast without newline");
    EXPECT_EQ(
        docs_of(d / "a.txt", text()),
        (std::vector<std::string>{"First doc line 1\nline 2\n", "Second\r\nwith CRLF\r\n", "last without newline"}));
}

TEST(Corpus, FileModeIsOneDocumentPerFileByteForByte) {
    TempDir d;
    const std::string body = "a\n\nb\n\n\n%\nc";
    write_bytes(d / "a.txt", body);
    EXPECT_EQ(docs_of(d / "a.txt", text("file")), (std::vector<std::string>{body}));
    write_bytes(d / "empty.txt", "");
    EXPECT_TRUE(docs_of(d / "empty.txt", text("file")).empty());
}

TEST(Corpus, SeparatorLineModeKeepsBlankLinesInsideDocuments) {
    TempDir d;
    write_bytes(d / "fortunes", "%\nA fortune\n\nwith a blank line\n%\n%\nB\n%\r\nC %\n%\n");
    EXPECT_EQ(docs_of(d / "fortunes", text("%")),
              (std::vector<std::string>{"A fortune\n\nwith a blank line\n", "B\n", "C %\n"}));
}

TEST(Corpus, LongLinesAcrossReadChunks) {
    TempDir d;
    std::string big(700000, 'x');  // longer than one 256 KiB read
    write_bytes(d / "big.txt", big + "\n\n" + big);
    auto docs = docs_of(d / "big.txt", text());
    ASSERT_EQ(docs.size(), 2u);
    EXPECT_EQ(docs[0], big + "\n");
    EXPECT_EQ(docs[1], big);
}

TEST(Corpus, JsonlTextFieldAndErrorsNameFileAndLine) {
    TempDir d;
    write_bytes(d / "a.jsonl",
                "{\"text\": \"one\\n\\ntwo\", \"id\": 1}\n\n{\"text\": \"\"}\n{\"body\": \"x\", \"text\": \"three "
                "<|endoftext|>\"}\n");
    CorpusOptions o;
    o.format = InputFormat::kJsonl;
    EXPECT_EQ(docs_of(d / "a.jsonl", o), (std::vector<std::string>{"one\n\ntwo", "three <|endoftext|>"}));
    o.text_field = "body";
    auto expect_error = [&](const std::string& content, const std::string& where, const std::string& what) {
        write_bytes(d / "bad.jsonl", content);
        try {
            docs_of(d / "bad.jsonl", o);
            ADD_FAILURE() << "accepted " << content;
        } catch (const FormatError& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find((d / "bad.jsonl").string() + ":" + where + ":"), std::string::npos) << msg;
            EXPECT_NE(msg.find(what), std::string::npos) << msg;
        }
    };
    expect_error("{\"body\": \"ok\"}\n{\"body\": \"ok\"}\n{\"text\": \"x\", \"id\": 2}\n", "3",
                 "no field \"body\" (fields present: id, text)");
    expect_error("{\"body\": \"ok\"}\n{\"body\": 1\n", "2", "invalid JSON");
    expect_error("\n\n[1, 2]\n", "3", "expected a JSON object");
    expect_error("{\"body\": 5}\n", "1", "is a number, expected a string");
}

TEST(Corpus, GzipInputsSingleAndMultiMember) {
    TempDir d;
    const std::string a = "alpha\n\nbeta\n", b = "\ngamma\n";
    write_bytes(d / "x.txt.gz", gzip(a));
    EXPECT_EQ(docs_of(d / "x.txt.gz", text()), (std::vector<std::string>{"alpha\n", "beta\n"}));
    // `cat a.gz b.gz` is a valid gzip file that decompresses to a + b (RFC 1952 members).
    write_bytes(d / "multi.gz", gzip(a) + gzip(b));
    EXPECT_EQ(docs_of(d / "multi.gz", text()), (std::vector<std::string>{"alpha\n", "beta\n", "gamma\n"}));
    CorpusOptions o;
    o.format = InputFormat::kJsonl;
    write_bytes(d / "j.jsonl.gz", gzip("{\"text\": \"from gz\"}\n"));
    EXPECT_EQ(docs_of(d / "j.jsonl.gz", o), (std::vector<std::string>{"from gz"}));
}

TEST(Corpus, BadGzipIsAFormatErrorNamingTheFile) {
    TempDir d;
    std::string big;
    for (int i = 0; i < 20000; ++i) big += "line " + std::to_string(i * 7919 % 10007) + "\n";
    const std::string z = gzip(big);
    for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
             {"trunc.gz", z.substr(0, z.size() / 2)}, {"notgz.gz", "plain text, not gzip\n"}, {"empty.gz", ""},
             {"garbage_tail.gz", z + "XYZ"}}) {
        write_bytes(d / name, bytes);
        try {
            docs_of(d / name, text());
            ADD_FAILURE() << name;
        } catch (const FormatError& e) {
            EXPECT_NE(std::string(e.what()).find((d / name).string()), std::string::npos) << e.what();
        }
    }
}

TEST(Corpus, HashesTheRawFileWhileReading) {
    TempDir d;
    const std::string z = gzip("a\n\nb\n");
    write_bytes(d / "x.gz", z);
    DocumentReader r(d / "x.gz", text());
    std::string doc;
    while (r.next(doc)) {
    }
    EXPECT_EQ(r.raw_bytes_read(), z.size());
    EXPECT_EQ(r.sha256_hex(), sha256_file(d / "x.gz"));
    write_bytes(d / "y.txt", "only\n");
    DocumentReader r2(d / "y.txt", text());
    r2.next(doc);  // partially read: the digest still covers the whole file
    EXPECT_EQ(r2.sha256_hex(), sha256_hex("only\n"));
}

TEST(Corpus, DirectoriesExpandRecursivelySortedSkippingHidden) {
    TempDir d;
    write_bytes(d / "in/b.txt", "b");
    write_bytes(d / "in/a/z.txt", "z");
    write_bytes(d / "in/a/y.txt.gz", gzip("y"));
    write_bytes(d / "in/.hidden", "h");
    write_bytes(d / "in/.git/config", "h");
    write_bytes(d / "single.txt", "s");
    auto files = list_input_files({(d / "single.txt").string(), (d / "in").string()});
    std::vector<std::string> rel;
    for (const auto& f : files) rel.push_back(std::filesystem::relative(f, d.path()).string());
    EXPECT_EQ(rel, (std::vector<std::string>{"single.txt", "in/a/y.txt.gz", "in/a/z.txt", "in/b.txt"}));
    try {
        list_input_files({(d / "missing.txt").string()});
        ADD_FAILURE();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("missing.txt"), std::string::npos);
    }
    std::filesystem::create_directories(d / "emptydir");
    EXPECT_THROW(list_input_files({(d / "emptydir").string()}), InputError);
    EXPECT_THROW(parse_input_format("csv"), InputError);
}

}  // namespace
}  // namespace llmt::data
