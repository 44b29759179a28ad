// Loading a Tokenizer: resolving the "gpt2" name to a file, and the three formats: tiktoken's .tiktoken
// (base64 token + rank per line), Hugging Face tokenizer.json (BPE + ByteLevel), and GPT-2's
// vocab.json + merges.txt. The last two use GPT-2's byte-to-unicode alphabet; ranks are derived from
// the merge order as tiktoken's data_gym_to_mergeable_bpe_ranks does, and must agree with the ids.
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/hub_cache.h"
#include "core/json_parse.h"
#include "core/sha256.h"
#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/tokenizer_vocab.h"
#include "core/knobs.h"

namespace fs = std::filesystem;

namespace llmt::data {
namespace {

// Hugging Face tokenizer.json files run to tens of MB; their nesting is a handful of levels. Key names
// stay out of messages: the file may be something else named by mistake.
constexpr JsonLimits kTokenizerJsonLimits{std::size_t{256} << 20, 32, false};

// sha256 of OpenAI's r50k_base.tiktoken (= gpt2), the file `--tokenizer gpt2` must find.
constexpr const char* kGpt2Sha256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930";

int base64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

// Standard base64 with '=' padding; false on any other character or a bad length.
bool base64_decode(std::string_view in, std::string& out) {
    out.clear();
    if (in.size() % 4 != 0 || in.empty()) return false;
    for (std::size_t i = 0; i < in.size(); i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; ++k) {
            const char c = in[i + k];
            if (c == '=' && i + 4 == in.size() && k >= 2) {
                v[k] = 0;
                ++pad;
            } else {
                if (pad > 0) return false;
                v[k] = base64_value(c);
                if (v[k] < 0) return false;
            }
        }
        const uint32_t w = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
        out.push_back(static_cast<char>(w >> 16));
        if (pad < 2) out.push_back(static_cast<char>((w >> 8) & 0xFF));
        if (pad < 1) out.push_back(static_cast<char>(w & 0xFF));
    }
    return true;
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 to U+0100.. in order.
// Also the single-byte rank order tiktoken's data_gym loader uses (the printable bytes first).
struct ByteAlphabet {
    uint32_t byte_to_cp[256];
    std::unordered_map<uint32_t, unsigned char> cp_to_byte;
    std::vector<unsigned char> rank_order;
    ByteAlphabet() {
        auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
        int n = 0;
        for (int b = 0; b < 256; ++b) {
            if (printable(b)) rank_order.push_back(static_cast<unsigned char>(b));
        }
        for (int b = 0; b < 256; ++b) {
            if (!printable(b)) rank_order.push_back(static_cast<unsigned char>(b));
            byte_to_cp[b] = printable(b) ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
            cp_to_byte[byte_to_cp[b]] = static_cast<unsigned char>(b);
        }
    }
};
const ByteAlphabet& alphabet() {
    static const ByteAlphabet a;
    return a;
}

bool is_hf_special(const std::string& s) { return s == "<|endoftext|>" || s == "<|startoftext|>"; }
}  // namespace

// Decodes a byte-level BPE token string (UTF-8 of alphabet code points) to its bytes; false when a
// character is outside the alphabet.
bool decode_byte_level(std::string_view s, std::string& out) {
    out.clear();
    const auto& a = alphabet();
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        uint32_t cp;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < s.size()) {
            cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
            i += 2;
        } else {
            return false;  // the alphabet is U+0000..U+0143: one or two UTF-8 bytes
        }
        auto it = a.cp_to_byte.find(cp);
        if (it == a.cp_to_byte.end()) return false;
        out.push_back(static_cast<char>(it->second));
    }
    return true;
}

namespace {

// Ranks from merges the way tiktoken's data_gym_to_mergeable_bpe_ranks derives them, checked against the
// ids of the vocabulary: a vocabulary whose ids do not follow its merge order would tokenize differently
// under rank-based BPE, so it is refused. `merges` are (line or index, left, right) in token strings.
struct Merge {
    std::size_t where;
    std::string left, right;
};
RankList ranks_from_merges(const std::vector<std::pair<std::string, uint32_t>>& vocab,
                           const std::vector<Merge>& merges, const std::string& vocab_name,
                           const std::string& merges_name, const char* where_word) {
    RankList list;
    std::unordered_map<std::string, uint32_t> ids;
    std::string bytes;
    for (const auto& [key, id] : vocab) {
        if (is_hf_special(key)) {
            list.specials.push_back({key, id, true});
            continue;
        }
        if (!decode_byte_level(key, bytes)) {
            // Token text is not quoted (here or below): the file may not be a vocabulary at all.
            throw FormatError(fmt::format("{}: the token with id {} has a character outside GPT-2's byte-level "
                                          "alphabet",
                                          vocab_name, id));
        }
        ids.emplace(bytes, id);
    }
    const auto& a = alphabet();
    uint32_t rank = 0;
    for (unsigned char b : a.rank_order) {
        const std::string one(1, static_cast<char>(b));
        auto it = ids.find(one);
        if (it == ids.end() || it->second != rank) {
            throw FormatError(fmt::format("{}: the single byte 0x{:02x} should have id {} (GPT-2's byte order), "
                                          "found {}",
                                          vocab_name, b, rank, it == ids.end() ? "none" : std::to_string(it->second)));
        }
        list.ranks.emplace_back(one, rank++);
    }
    // merges.txt: "FILE:LINE"; tokenizer.json: "FILE: model.merges[INDEX]".
    auto where = [&](const Merge& m) {
        return *where_word ? fmt::format("{}: {}[{}]", merges_name, where_word, m.where)
                           : fmt::format("{}:{}", merges_name, m.where);
    };
    std::string l, r;
    for (const Merge& m : merges) {
        if (!decode_byte_level(m.left, l) || !decode_byte_level(m.right, r)) {
            throw FormatError(fmt::format("{}: the merge has a character outside GPT-2's byte-level alphabet",
                                          where(m)));
        }
        const std::string merged = l + r;
        auto it = ids.find(merged);
        if (it == ids.end() || it->second != rank) {
            throw FormatError(fmt::format(
                "{}: the merge gives rank {} but {} has {} for the merged token; only vocabularies whose ids "
                "follow the merge order (like GPT-2's) give the same tokens under rank-based BPE",
                where(m), rank, vocab_name,
                it == ids.end() ? std::string("no id") : fmt::format("id {}", it->second)));
        }
        list.ranks.emplace_back(merged, rank++);
    }
    if (list.ranks.size() != ids.size()) {
        throw FormatError(fmt::format("{}: {} tokens but {} has only {} merges (+256 bytes); every non-special "
                                      "token must come from a merge",
                                      vocab_name, ids.size(), merges_name, merges.size()));
    }
    return list;
}

std::optional<fs::path> running_binary() {
    std::error_code ec;
    fs::path p = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return std::nullopt;
    return p;
}

// Candidate paths for gpt2.tiktoken, in search order (tokenizer.h).
std::vector<fs::path> gpt2_search_paths() {
    std::vector<fs::path> paths;
    if (const std::string home = location_value(Location::kHome); !home.empty()) {
        paths.push_back(fs::path(home) / "tokenizers" / "gpt2.tiktoken");
    }
    if (auto exe = running_binary()) {
        const fs::path dir = exe->parent_path();
        paths.push_back(dir.parent_path() / "share" / "llmtrain" / "tokenizers" / "gpt2.tiktoken");
        // The checkout: the binary is build/<preset>/llmtrain, tests are deeper (build/<preset>/tests/<layer>/).
        fs::path up = dir;
        for (int i = 0; i < 4 && up != up.parent_path(); ++i) {
            up = up.parent_path();
            paths.push_back(up / "data" / "tokenizers" / "gpt2.tiktoken");
            std::error_code ec;
            if (fs::exists(up / "src" / "data" / "tokenizer.h", ec)) break;  // the checkout's root
        }
    }
    return paths;
}

std::shared_ptr<const TokenizerImpl> make_impl(RankList list) {
    return std::make_shared<const TokenizerImpl>(TokenizerImpl::build(std::move(list)));
}

}  // namespace

RankList load_tiktoken_file(const std::string& path) {
    const std::string data = read_file(path);
    RankList list;
    list.source_path = path;
    list.source_sha256 = sha256_hex(data);
    std::size_t line_no = 0;
    std::string bytes;
    uint32_t max_rank = 0;
    for (std::size_t pos = 0; pos < data.size();) {
        std::size_t eol = data.find('\n', pos);
        if (eol == std::string::npos) eol = data.size();
        std::string_view line(data.data() + pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) continue;
        const std::size_t sp = line.find(' ');
        // The line itself is never quoted: a file named by mistake may hold a secret (a tokens file).
        auto bad = [&](const char* what) {
            return FormatError(fmt::format("{}:{}: {}; expected 'BASE64 RANK' (the .tiktoken format) on every line",
                                           path, line_no, what));
        };
        if (sp == std::string_view::npos) throw bad("no space");
        if (!base64_decode(line.substr(0, sp), bytes)) throw bad("invalid base64");
        const std::string_view num = line.substr(sp + 1);
        uint64_t rank = 0;
        if (num.empty() || num.size() > 9) throw bad("invalid rank");
        for (char c : num) {
            if (c < '0' || c > '9') throw bad("invalid rank");
            rank = rank * 10 + static_cast<uint64_t>(c - '0');
        }
        max_rank = std::max(max_rank, static_cast<uint32_t>(rank));
        list.ranks.emplace_back(bytes, static_cast<uint32_t>(rank));
    }
    if (list.ranks.empty()) throw FormatError(fmt::format("{}: no tokens (an empty .tiktoken file)", path));
    // A .tiktoken file holds only the mergeable ranks; tiktoken's gpt2 adds <|endoftext|> right after them.
    list.specials.push_back({"<|endoftext|>", max_rank + 1, true});
    return list;
}

namespace {
RankList load_hf_tokenizer_json_unchecked(const std::string& path) {
    const std::string data = read_file(path);
    const nlohmann::json j = parse_json(data, path, kTokenizerJsonLimits);
    auto fail = [&](const std::string& key, const std::string& what) {
        return FormatError(fmt::format("{}: {}: {}", path, key, what));
    };
    if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
        throw fail("model", "missing; expected a Hugging Face tokenizer.json");
    const auto& model = j["model"];
    if (model.value("type", std::string("BPE")) != "BPE")
        throw fail("model.type", "is not \"BPE\"; only BPE is supported");
    const auto& pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : nlohmann::json();
    // A Split (regex) pre-tokenizer, alone or before ByteLevel without its regex: Llama 3's layout.
    if (pre.is_object() && (pre.value("type", "") == "Sequence" || pre.value("type", "") == "Split"))
        return load_hf_split_tokenizer_json(path, j, sha256_hex(data));
    if (!pre.is_object() || pre.value("type", "") != "ByteLevel" || pre.value("add_prefix_space", false) ||
        !pre.value("use_regex", true)) {
        throw fail("pre_tokenizer", "must be {\"type\": \"ByteLevel\", \"add_prefix_space\": false} (GPT-2's "
                                    "pre-tokenization) or a Split with Llama 3's or GPT-2's pattern followed by "
                                    "{\"type\": \"ByteLevel\", \"use_regex\": false} (the pre-tokenizers llmtrain "
                                    "implements)");
    }
    if (j.contains("normalizer") && !j["normalizer"].is_null()) throw fail("normalizer", "must be null");
    if (!model.contains("vocab") || !model["vocab"].is_object()) throw fail("model.vocab", "missing or not an object");
    if (!model.contains("merges") || !model["merges"].is_array())
        throw fail("model.merges", "missing or not an array");
    std::vector<std::pair<std::string, uint32_t>> vocab;
    for (const auto& [key, id] : model["vocab"].items()) {
        if (!id.is_number_unsigned())
            throw fail(fmt::format("model.vocab entry {}", vocab.size()), "id is not a non-negative integer");
        vocab.emplace_back(key, id.get<uint32_t>());
    }
    std::vector<Merge> merges;
    std::size_t index = 0;
    for (const auto& m : model["merges"]) {
        Merge mg{index++, {}, {}};
        if (m.is_string()) {
            const std::string s = m.get<std::string>();
            const std::size_t sp = s.find(' ');
            if (sp == std::string::npos)
                throw fail(fmt::format("model.merges[{}]", mg.where), "expected \"LEFT RIGHT\"");
            mg.left = s.substr(0, sp);
            mg.right = s.substr(sp + 1);
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            mg.left = m[0].get<std::string>();
            mg.right = m[1].get<std::string>();
        } else {
            throw fail(fmt::format("model.merges[{}]", mg.where), "expected \"LEFT RIGHT\" or [LEFT, RIGHT]");
        }
        merges.push_back(std::move(mg));
    }
    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
        for (const auto& t : j["added_tokens"]) {
            const std::string content = t.value("content", "");
            if (!t.value("special", false) || !t.contains("id")) continue;
            const uint32_t id = t["id"].get<uint32_t>();
            bool listed = false;
            for (auto& [k, v] : vocab) listed = listed || (k == content && v == id);
            if (!listed) vocab.emplace_back(content, id);
            if (!is_hf_special(content)) {
                throw fail("added_tokens", "a special token other than <|endoftext|> is not supported");
            }
        }
    }
    RankList list = ranks_from_merges(vocab, merges, path + " (model.vocab)", path, "model.merges");
    list.source_path = path;
    list.source_sha256 = sha256_hex(data);
    return list;
}
}  // namespace

RankList load_hf_tokenizer_json(const std::string& path) {
    try {
        return load_hf_tokenizer_json_unchecked(path);
    } catch (const nlohmann::json::exception& e) {  // a value of the wrong JSON type somewhere
        // nlohmann's type_error names types and keys of its own, never values.
        throw FormatError(fmt::format("{}: unexpected JSON value: {}", path, e.what()));
    }
}

RankList load_vocab_merges(const std::string& vocab_path, const std::string& merges_path) {
    const std::string vdata = read_file(vocab_path);
    const std::string mdata = read_file(merges_path);
    const nlohmann::json j = parse_json(vdata, vocab_path, kTokenizerJsonLimits);
    if (!j.is_object()) throw FormatError(fmt::format("{}: expected a JSON object of token -> id", vocab_path));
    std::vector<std::pair<std::string, uint32_t>> vocab;
    for (const auto& [key, id] : j.items()) {
        if (!id.is_number_unsigned())
            throw FormatError(fmt::format("{}: entry {}: id is not a non-negative integer", vocab_path, vocab.size()));
        vocab.emplace_back(key, id.get<uint32_t>());
    }
    std::vector<Merge> merges;
    std::size_t line_no = 0;
    for (std::size_t pos = 0; pos < mdata.size();) {
        std::size_t eol = mdata.find('\n', pos);
        if (eol == std::string::npos) eol = mdata.size();
        std::string line = mdata.substr(pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
        const std::size_t sp = line.find(' ');
        if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos) {
            throw FormatError(fmt::format("{}:{}: expected \"LEFT RIGHT\" (two tokens and one space), found {}",
                                          merges_path, line_no,
                                          sp == std::string::npos ? "no space" : "more than one space"));
        }
        merges.push_back({line_no, line.substr(0, sp), line.substr(sp + 1)});
    }
    RankList list = ranks_from_merges(vocab, merges, vocab_path, merges_path, "");
    list.source_path = vocab_path;
    list.source_sha256 = sha256_hex(vdata + mdata);
    return list;
}

Tokenizer Tokenizer::load(const std::string& spec) {
    if (spec == "gpt2") {
        const auto paths = gpt2_search_paths();
        for (const auto& p : paths) {
            std::error_code ec;
            if (!fs::is_regular_file(p, ec)) continue;
            RankList list = load_tiktoken_file(p.string());
            if (list.source_sha256 != kGpt2Sha256) {
                throw FormatError(fmt::format("{}: sha256 is {}, expected {} (OpenAI's r50k_base.tiktoken); the file "
                                              "is corrupt or a different vocabulary\nhint: delete it and run "
                                              "scripts/setup.sh to install it again",
                                              p.string(), list.source_sha256, kGpt2Sha256));
            }
            return Tokenizer(make_impl(std::move(list)));
        }
        std::string looked;
        for (const auto& p : paths) looked += "\n  " + p.string();
        throw InputError(fmt::format("tokenizer \"gpt2\": gpt2.tiktoken not found; looked in:{}\nhint: run "
                                     "scripts/setup.sh (installs data/tokenizers/gpt2.tiktoken), set LLMTRAIN_HOME, "
                                     "or pass --tokenizer PATH",
                                     looked.empty() ? std::string("\n  (nowhere: LLMTRAIN_HOME unset and the "
                                                                  "binary's path is unknown)")
                                                    : looked));
    }
    std::error_code ec;
    const fs::path p = resolve_hub_path(spec);  // a hub cache folder (models--ORG--NAME): its snapshot
    if (fs::is_directory(p, ec)) {
        if (fs::exists(p / "vocab.json") && fs::exists(p / "merges.txt"))
            return Tokenizer(make_impl(load_vocab_merges((p / "vocab.json").string(), (p / "merges.txt").string())));
        if (fs::exists(p / "tokenizer.json"))
            return Tokenizer(make_impl(load_hf_tokenizer_json((p / "tokenizer.json").string())));
        throw InputError(fmt::format("tokenizer \"{}\": a directory without vocab.json + merges.txt or tokenizer.json",
                                     spec));
    }
    if (fs::is_regular_file(p, ec)) {
        if (p.extension() == ".json") return Tokenizer(make_impl(load_hf_tokenizer_json(spec)));
        return Tokenizer(make_impl(load_tiktoken_file(spec)));
    }
    if (fs::is_regular_file(spec + "vocab.json", ec) && fs::is_regular_file(spec + "merges.txt", ec))
        return Tokenizer(make_impl(load_vocab_merges(spec + "vocab.json", spec + "merges.txt")));
    throw InputError(fmt::format("tokenizer \"{}\": no such file or directory; expected \"gpt2\", a .tiktoken file, "
                                 "a tokenizer.json, or a directory or prefix with vocab.json + merges.txt",
                                 spec));
}

}  // namespace llmt::data
