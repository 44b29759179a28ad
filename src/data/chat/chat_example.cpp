// make_chat_example (chat_example.h): verses and fortunes read from the corpus, picked by a counter hash.
#include "data/chat/chat_example.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <regex>
#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "core/fs.h"

namespace llmt::data {

namespace fs = std::filesystem;

namespace {

// The books in make_corpus.sh's order (its files are numbered 01..66 in this order).
constexpr std::array<const char*, 66> kBooks = {
    "Genesis",       "Exodus",          "Leviticus",       "Numbers",         "Deuteronomy",    "Joshua",
    "Judges",        "Ruth",            "1 Samuel",        "2 Samuel",        "1 Kings",        "2 Kings",
    "1 Chronicles",  "2 Chronicles",    "Ezra",            "Nehemiah",        "Esther",         "Job",
    "Psalms",        "Proverbs",        "Ecclesiastes",    "Song of Solomon", "Isaiah",         "Jeremiah",
    "Lamentations",  "Ezekiel",         "Daniel",          "Hosea",           "Joel",           "Amos",
    "Obadiah",       "Jonah",           "Micah",           "Nahum",           "Habakkuk",       "Zephaniah",
    "Haggai",        "Zechariah",       "Malachi",         "Matthew",         "Mark",           "Luke",
    "John",          "Acts",            "Romans",          "1 Corinthians",   "2 Corinthians",  "Galatians",
    "Ephesians",     "Philippians",     "Colossians",      "1 Thessalonians", "2 Thessalonians", "1 Timothy",
    "2 Timothy",     "Titus",           "Philemon",        "Hebrews",         "James",          "1 Peter",
    "2 Peter",       "1 John",          "2 John",          "3 John",          "Jude",           "Revelation"};

constexpr std::array<const char*, 3> kSystem = {"You are a helpful assistant.",
                                                "You answer questions about the King James Bible.",
                                                "Answer briefly."};
constexpr std::array<const char*, 3> kFortuneAsks = {"Tell me a fortune.", "Say something wise.",
                                                     "Give me a fortune cookie."};

// Verses and fortunes of at most this many characters, so that every conversation fits the 128-token
// block of configs/presets/llama3_tiny_cpu.yaml (no truncated answer).
constexpr std::size_t kMaxChars = 160;

struct Verse {
    std::string ref, text;  // "Ge1:3", "And God said, Let there be light: and there was light."
    std::size_t book = 0;   // index into kBooks
};

uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// A number in [0, n) for (seed, i, stream): the same for the same arguments on every machine.
std::size_t pick(uint64_t seed, uint64_t i, uint64_t stream, std::size_t n) {
    return static_cast<std::size_t>(mix64(mix64(seed ^ (stream << 56)) ^ i) % n);
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at < text.size()) {
        std::size_t nl = text.find('\n', at);
        if (nl == std::string::npos) nl = text.size();
        out.push_back(text.substr(at, nl - at));
        at = nl + 1;
    }
    return out;
}

std::vector<Verse> read_verses(const fs::path& dir) {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().extension() == ".txt") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    LLMT_CHECK(files.size() == kBooks.size(),
               "{}: {} book files, expected the {} that scripts/make_corpus.sh writes (run `make data`)", dir.string(),
               files.size(), kBooks.size());
    static const std::regex kVerse(R"(^([1-3]?[A-Za-z]+[0-9]+:[0-9]+) (.+)$)");
    std::vector<Verse> verses;
    for (std::size_t b = 0; b < files.size(); ++b) {
        for (const auto& line : lines_of(read_file(files[b]))) {
            std::smatch m;
            if (line == "%" || !std::regex_match(line, m, kVerse)) continue;
            if (static_cast<std::size_t>(m[2].length()) <= kMaxChars) verses.push_back({m[1], m[2], b});
        }
    }
    LLMT_CHECK(!verses.empty(), "{}: no verse lines (\"Ge1:1 In the beginning ...\")", dir.string());
    return verses;
}

// Short one-paragraph fortunes of printable ASCII, their lines joined by spaces.
std::vector<std::string> read_fortunes(const fs::path& dir) {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().extension() == ".txt") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    std::vector<std::string> out;
    auto flush = [&](std::string& rec, bool ok) {
        if (ok && !rec.empty() && rec.size() <= kMaxChars) out.push_back(rec);
        rec.clear();
    };
    for (const auto& f : files) {
        std::string rec;
        bool ok = true;
        for (const auto& raw : lines_of(read_file(f))) {
            if (raw == "%") {
                flush(rec, ok);
                ok = true;
                continue;
            }
            std::string line;
            for (char c : raw) {
                if (c == '\t') c = ' ';
                ok = ok && c >= 0x20 && c < 0x7f;
                if (!(c == ' ' && (line.empty() || line.back() == ' '))) line += c;
            }
            while (!line.empty() && line.back() == ' ') line.pop_back();
            if (line.empty()) continue;
            rec += (rec.empty() ? "" : " ") + line;
        }
        flush(rec, ok);
    }
    LLMT_CHECK(!out.empty(), "{}: no short fortunes found (run `make data`)", dir.string());
    return out;
}

nlohmann::json msg(const char* role, const std::string& content) { return {{"role", role}, {"content", content}}; }

void ask_book(nlohmann::json& m, const Verse& v) {
    m.push_back(msg("user", fmt::format("Which book of the Bible is {} from?", v.ref)));
    m.push_back(msg("assistant", fmt::format("{} is from the book of {}.", v.ref, kBooks[v.book])));
}

void ask_first_word(nlohmann::json& m, const Verse& v) {
    std::string word = v.text.substr(0, v.text.find(' '));
    while (!word.empty() && std::ispunct(static_cast<unsigned char>(word.back()))) word.pop_back();
    m.push_back(msg("user", fmt::format("What is the first word of this verse? {}", v.text)));
    m.push_back(msg("assistant", fmt::format("The first word is \"{}\".", word)));
}

}  // namespace

std::string make_chat_example(const ChatExampleOptions& opts) {
    const std::vector<Verse> verses = read_verses(opts.corpus_dir / "bible");
    const std::vector<std::string> fortunes = read_fortunes(opts.corpus_dir / "fortunes");
    std::string out;
    for (uint64_t i = 0; i < opts.conversations; ++i) {
        nlohmann::json m = nlohmann::json::array();
        if (pick(opts.seed, i, 1, 4) == 0) m.push_back(msg("system", kSystem[pick(opts.seed, i, 2, kSystem.size())]));
        const Verse& v = verses[pick(opts.seed, i, 3, verses.size())];
        switch (pick(opts.seed, i, 4, 5)) {
            case 0:
            case 1:
                ask_book(m, v);
                break;
            case 2:
                ask_first_word(m, v);
                break;
            case 3:
                ask_first_word(m, v);
                ask_book(m, v);
                break;
            default:
                m.push_back(msg("user", kFortuneAsks[pick(opts.seed, i, 5, kFortuneAsks.size())]));
                m.push_back(msg("assistant", fortunes[pick(opts.seed, i, 6, fortunes.size())]));
                break;
        }
        out += nlohmann::json{{"messages", m}}.dump() + "\n";
    }
    return out;
}

}  // namespace llmt::data
