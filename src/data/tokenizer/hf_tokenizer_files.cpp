#include "data/tokenizer/hf_tokenizer_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/fs.h"
#include "data/chat/chat_template.h"
#include "data/tokenizer/tokenizer.h"

namespace llmt::data {

namespace fs = std::filesystem;

namespace {

constexpr uint32_t kNoId = 0xFFFFFFFFu;

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 for U+0100.. in
// byte order; the text of a byte-level BPE token in vocab.json and merges.txt is its bytes so mapped.
std::string byte_level_text(std::string_view bytes) {
    static const auto table = [] {
        std::vector<std::string> t(256);
        auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : next++;
            std::string& s = t[static_cast<std::size_t>(b)];
            if (cp < 0x80) {
                s.push_back(static_cast<char>(cp));
            } else {  // every code point here is below U+0800: two UTF-8 bytes
                s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
                s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
            }
        }
        return t;
    }();
    std::string out;
    for (unsigned char c : bytes) out += table[c];
    return out;
}

// tokenizer_config.json's token entries: a string, or {"content": ...} (transformers' AddedToken); "" else.
std::string token_text(const nlohmann::json& cfg, const char* key) {
    auto it = cfg.find(key);
    if (it == cfg.end()) return "";
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
        return (*it)["content"].get<std::string>();
    return "";
}

std::vector<int64_t> one_id(uint32_t id) { return id == kNoId ? std::vector<int64_t>{} : std::vector<int64_t>{id}; }

// bos/eos/pad from tokenizer_config.json (`cfg`, possibly empty), else from the tokenizer itself.
HfSpecialIds special_ids(const Tokenizer& tok, const nlohmann::json& cfg, const std::string& cfg_text,
                         const std::string& cfg_path) {
    HfSpecialIds ids;
    auto named = [&](const char* key) {
        const std::string t = cfg.is_object() ? token_text(cfg, key) : "";
        return t.empty() ? kNoId : tok.token_id(t);
    };
    uint32_t bos = named("bos_token");
    if (bos == kNoId && !tok.prefix_tokens().empty()) bos = tok.prefix_tokens().front();
    if (bos == kNoId) bos = tok.eot_token();  // GPT-2: <|endoftext|> begins and ends
    uint32_t eos = named("eos_token");
    if (eos == kNoId) eos = tok.eot_token();
    uint32_t pad = named("pad_token");
    if (pad == kNoId) pad = eos;
    ids.bos_token_id = one_id(bos);
    ids.eos_token_id = one_id(eos);
    ids.pad_token_id = one_id(pad);
    ids.generation_eos_token_id = ids.eos_token_id;
    if (cfg.is_object() && cfg.contains("chat_template")) {
        try {  // a template we cannot render still travels with the files; it only adds no stop id
            const uint32_t eot = tok.token_id(ChatTemplate::parse(cfg_text, cfg_path).end_of_turn());
            if (eot != kNoId && eot != eos) ids.generation_eos_token_id.push_back(eot);
        } catch (const FormatError&) {
        }
    }
    return ids;
}

nlohmann::json read_config(const fs::path& file, std::string& text) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return nlohmann::json::object();
    text = read_file(file.string());
    // nlohmann's own parser, as data/chat/chat_template.cpp: transformers writes model_max_length as int(1e30),
    // beyond the 64-bit integers parse_json accepts.
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        throw FormatError(fmt::format("{}: invalid JSON at byte {}", file.string(), e.byte));
    }
    if (!j.is_object())
        throw FormatError(fmt::format("{}: expected a JSON object (tokenizer_config.json)", file.string()));
    return j;
}

}  // namespace

bool has_hf_tokenizer_files(const fs::path& dir) {
    std::error_code ec;
    return !dir.empty() &&
           (fs::is_regular_file(dir / "tokenizer.json", ec) ||
            (fs::is_regular_file(dir / "vocab.json", ec) && fs::is_regular_file(dir / "merges.txt", ec)));
}

std::pair<std::string, std::string> gpt2_vocab_and_merges(const Tokenizer& tok) {
    std::unordered_set<uint32_t> special;
    for (const auto& [text, id] : tok.special_tokens()) special.insert(id);
    const auto n = static_cast<uint32_t>(tok.vocab_size());
    std::unordered_map<std::string_view, uint32_t> rank;
    for (uint32_t id = 0; id < n; ++id)
        if (!special.count(id)) rank.emplace(tok.token_bytes(id), id);
    nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
    std::string merges = "#version: 0.2\n";
    std::vector<std::string> parts;
    for (uint32_t id = 0; id < n; ++id) {
        const std::string_view bytes = tok.token_bytes(id);
        vocab[special.count(id) ? std::string(bytes) : byte_level_text(bytes)] = id;
        if (special.count(id) || bytes.size() < 2) continue;
        // BPE over the token's bytes with the ranks below its own: the lowest-ranked adjacent pair merges
        // first, until no pair below `id` is left. A token of a BPE vocabulary ends as exactly two parts.
        parts.assign(bytes.size(), {});
        for (std::size_t i = 0; i < bytes.size(); ++i) parts[i] = std::string(1, bytes[i]);
        for (;;) {
            uint32_t best = std::numeric_limits<uint32_t>::max();
            std::size_t at = 0;
            for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
                const auto it = rank.find(parts[i] + parts[i + 1]);
                if (it != rank.end() && it->second < id && it->second < best) {
                    best = it->second;
                    at = i;
                }
            }
            if (best == std::numeric_limits<uint32_t>::max()) break;
            parts[at] += parts[at + 1];
            parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
        }
        if (parts.size() != 2)
            throw FormatError(
                fmt::format("{}: token {} is not the merge of two lower-ranked tokens ({} parts remain); "
                            "only a byte-level BPE vocabulary can be written as vocab.json + merges.txt",
                            tok.source_path(), id, parts.size()));
        merges += byte_level_text(parts[0]) + " " + byte_level_text(parts[1]) + "\n";
    }
    return {vocab.dump(), merges};
}

HfTokenizerFiles HfTokenizerFiles::from_spec(const std::string& spec, int model_max_length) {
    const Tokenizer tok = Tokenizer::load(spec);
    HfTokenizerFiles f;
    f.spec_ = spec;
    f.vocab_size_ = tok.vocab_size();
    std::error_code ec;
    const fs::path p(spec);
    fs::path dir;  // where the source's own files are
    if (fs::is_directory(p, ec)) dir = p;
    else if (p.filename() == "tokenizer.json") dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();

    std::string cfg_text;
    const fs::path cfg_file = dir.empty() ? fs::path() : dir / "tokenizer_config.json";
    nlohmann::json cfg = dir.empty() ? nlohmann::json::object() : read_config(cfg_file, cfg_text);
    // The same order as Tokenizer::load: a tokenizer.json named, GPT-2's two files, a directory's tokenizer.json.
    const bool vocab_merges = !dir.empty() && p.filename() != "tokenizer.json" &&
                              fs::is_regular_file(dir / "vocab.json", ec) &&
                              fs::is_regular_file(dir / "merges.txt", ec);
    const bool hf_json = !dir.empty() && !vocab_merges;
    if (hf_json) {
        f.copies_.emplace_back("tokenizer.json", p.filename() == "tokenizer.json" ? p : dir / "tokenizer.json");
    } else if (vocab_merges) {
        f.copies_.emplace_back("vocab.json", dir / "vocab.json");
        f.copies_.emplace_back("merges.txt", dir / "merges.txt");
    } else {  // a .tiktoken vocabulary ("gpt2" among them): GPT-2's two files recovered from the ranks
        auto [vocab, merges] = gpt2_vocab_and_merges(tok);
        f.contents_.emplace_back("vocab.json", std::move(vocab));
        f.contents_.emplace_back("merges.txt", std::move(merges));
    }
    f.ids_ = special_ids(tok, cfg, cfg_text, cfg_file.string());
    if (!cfg_text.empty()) {
        f.copies_.emplace_back("tokenizer_config.json", cfg_file);
    } else {  // what transformers needs to pick the class and the special tokens
        const std::string eos(tok.token_bytes(static_cast<uint32_t>(f.ids_.eos_token_id.at(0))));
        const std::string bos(tok.token_bytes(static_cast<uint32_t>(f.ids_.bos_token_id.at(0))));
        nlohmann::json j = {{"tokenizer_class", hf_json ? "PreTrainedTokenizerFast" : "GPT2Tokenizer"},
                            {"bos_token", bos},
                            {"eos_token", eos},
                            {"model_max_length", model_max_length},
                            {"clean_up_tokenization_spaces", false}};
        if (!hf_json) {
            j["unk_token"] = eos;
            j["add_prefix_space"] = false;
            j["add_bos_token"] = false;
            j["errors"] = "replace";
        }
        f.contents_.emplace_back("tokenizer_config.json", j.dump(2) + "\n");
    }
    if (!dir.empty() && fs::is_regular_file(dir / "special_tokens_map.json", ec))
        f.copies_.emplace_back("special_tokens_map.json", dir / "special_tokens_map.json");
    return f;
}

void HfTokenizerFiles::write(const fs::path& dir) const {
    for (const auto& [name, from] : copies_) write_file_atomic(dir / name, read_file(from.string()));
    for (const auto& [name, text] : contents_) write_file_atomic(dir / name, text);
}

std::vector<std::string> HfTokenizerFiles::names() const {
    std::vector<std::string> n;
    for (const auto& c : copies_) n.push_back(c.first);
    for (const auto& c : contents_) n.push_back(c.first);
    return n;
}

}  // namespace llmt::data
