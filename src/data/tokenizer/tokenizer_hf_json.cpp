// Hugging Face tokenizer.json with a Split (regex) pre-tokenizer before ByteLevel(use_regex: false): the
// layout of Llama 3 (and of tiktoken-converted vocabularies). The BPE model keeps Hugging Face's
// semantics: the merge list's order is the merge priority and only listed pairs merge; ignore_merges
// makes a piece that is itself a token that token. Everything else the file may say is either
// implemented here or refused naming the key, so that no setting is silently read differently. Values and
// token texts stay out of messages (the file may be something else named by mistake).
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer/tokenizer_vocab.h"

namespace llmt::data {
namespace {

// The patterns our hand-written pre-tokenizers implement, as tokenizer.json spells them.
constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

class Reader {
public:
    explicit Reader(const std::string& path) : path_(path) {}

    FormatError fail(const std::string& key, const std::string& what) const {
        return FormatError(fmt::format("{}: {}: {}", path_, key, what));
    }
    // j[key] when present and not null; nullptr otherwise.
    static const nlohmann::json* get(const nlohmann::json& j, const char* key) {
        auto it = j.find(key);
        return it == j.end() || it->is_null() ? nullptr : &*it;
    }
    std::string string_at(const nlohmann::json& j, const char* key, const std::string& where) const {
        const auto* v = get(j, key);
        if (!v || !v->is_string()) throw fail(where + "." + key, "missing or not a string");
        return v->get<std::string>();
    }
    bool bool_at(const nlohmann::json& j, const char* key, bool dflt, const std::string& where) const {
        const auto* v = get(j, key);
        if (!v) return dflt;
        if (!v->is_boolean()) throw fail(where + "." + key, "is not true or false");
        return v->get<bool>();
    }
    // Refuses a key whose value is anything but null / absent / `allowed`.
    void require_unset(const nlohmann::json& j, const char* key, const std::string& where, const char* why,
                       const nlohmann::json& allowed = nullptr) const {
        const auto* v = get(j, key);
        if (v && *v != allowed) throw fail(where + "." + key, fmt::format("is set, which is not supported ({})", why));
    }

private:
    const std::string& path_;
};

Pretokenizer read_pre_tokenizer(const Reader& r, const nlohmann::json& pre) {
    // Sequence [Split, ByteLevel] (or the Split alone would leave text unmapped to the byte alphabet,
    // which byte-level vocabularies cannot encode: refused).
    if (pre.value("type", "") != "Sequence")
        throw r.fail("pre_tokenizer", "a Split alone is not supported; expected a Sequence of Split and ByteLevel");
    const auto* list = Reader::get(pre, "pretokenizers");
    if (!list || !list->is_array() || list->size() != 2)
        throw r.fail("pre_tokenizer.pretokenizers", "expected exactly [Split, ByteLevel]");
    const auto& split = (*list)[0];
    const auto& bl = (*list)[1];
    if (!split.is_object() || split.value("type", "") != "Split")
        throw r.fail("pre_tokenizer.pretokenizers[0].type", "expected \"Split\"");
    const auto* pattern = Reader::get(split, "pattern");
    if (!pattern || !pattern->is_object() || !pattern->contains("Regex") || !(*pattern)["Regex"].is_string())
        throw r.fail("pre_tokenizer.pretokenizers[0].pattern", "expected {\"Regex\": PATTERN}");
    const std::string regex = (*pattern)["Regex"].get<std::string>();
    Pretokenizer kind;
    if (regex == kLlama3Pattern) {
        kind = Pretokenizer::kLlama3;
    } else if (regex == kGpt2Pattern) {
        kind = Pretokenizer::kGpt2;
    } else {
        throw r.fail("pre_tokenizer.pretokenizers[0].pattern.Regex",
                     "not a pattern llmtrain implements (Llama 3's / cl100k_base's and GPT-2's are; they are "
                     "hand-written, not a regex engine)");
    }
    if (split.value("behavior", "") != "Isolated")
        throw r.fail("pre_tokenizer.pretokenizers[0].behavior", "only \"Isolated\" is supported");
    if (r.bool_at(split, "invert", false, "pre_tokenizer.pretokenizers[0]"))
        throw r.fail("pre_tokenizer.pretokenizers[0].invert", "true is not supported");
    if (!bl.is_object() || bl.value("type", "") != "ByteLevel")
        throw r.fail("pre_tokenizer.pretokenizers[1].type", "expected \"ByteLevel\"");
    if (r.bool_at(bl, "add_prefix_space", false, "pre_tokenizer.pretokenizers[1]"))
        throw r.fail("pre_tokenizer.pretokenizers[1].add_prefix_space", "true is not supported");
    if (r.bool_at(bl, "use_regex", true, "pre_tokenizer.pretokenizers[1]"))
        throw r.fail("pre_tokenizer.pretokenizers[1].use_regex",
                     "must be false (a second, GPT-2 split after the Split is not supported)");
    return kind;
}

// TemplateProcessing's "single" template: special tokens around one sequence "A".
void read_template(const Reader& r, const nlohmann::json& tp, const std::string& where, RankList& list) {
    const auto* single = Reader::get(tp, "single");
    if (!single || !single->is_array()) throw r.fail(where + ".single", "missing or not an array");
    const auto* specials = Reader::get(tp, "special_tokens");
    bool seen_sequence = false;
    for (std::size_t i = 0; i < single->size(); ++i) {
        const auto& piece = (*single)[i];
        const std::string at = fmt::format("{}.single[{}]", where, i);
        if (piece.is_object() && piece.contains("Sequence")) {
            if (seen_sequence || piece["Sequence"].value("id", "") != "A")
                throw r.fail(at, "expected one Sequence with id \"A\"");
            seen_sequence = true;
            continue;
        }
        if (!piece.is_object() || !piece.contains("SpecialToken") || !piece["SpecialToken"].is_object())
            throw r.fail(at, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
        const std::string name = r.string_at(piece["SpecialToken"], "id", at + ".SpecialToken");
        const nlohmann::json* entry =
            specials && specials->is_object() ? Reader::get(*specials, name.c_str()) : nullptr;
        const nlohmann::json* ids = entry ? Reader::get(*entry, "ids") : nullptr;
        if (!ids || !ids->is_array())
            throw r.fail(where + ".special_tokens", fmt::format("no ids for the special token of {}", at));
        for (const auto& id : *ids) {
            if (!id.is_number_unsigned())
                throw r.fail(where + ".special_tokens", "an id is not a non-negative integer");
            (seen_sequence ? list.suffix : list.prefix).push_back(id.get<uint32_t>());
        }
    }
    if (!seen_sequence) throw r.fail(where + ".single", "has no Sequence \"A\"");
}

void read_post_processor(const Reader& r, const nlohmann::json& pp, const std::string& where, RankList& list) {
    const std::string type = pp.value("type", "");
    if (type == "ByteLevel") return;  // offsets only; no tokens added
    if (type == "TemplateProcessing") {
        if (!list.prefix.empty() || !list.suffix.empty()) throw r.fail(where, "a second TemplateProcessing");
        read_template(r, pp, where, list);
        return;
    }
    if (type == "Sequence") {
        const auto* procs = Reader::get(pp, "processors");
        if (!procs || !procs->is_array()) throw r.fail(where + ".processors", "missing or not an array");
        for (std::size_t i = 0; i < procs->size(); ++i)
            read_post_processor(r, (*procs)[i], fmt::format("{}.processors[{}]", where, i), list);
        return;
    }
    throw r.fail(where + ".type", "is not supported (ByteLevel, TemplateProcessing or a Sequence of them are)");
}

}  // namespace

RankList load_hf_split_tokenizer_json(const std::string& path, const nlohmann::json& j, const std::string& sha256) {
    const Reader r(path);
    RankList list;
    list.source_path = path;
    list.source_sha256 = sha256;
    list.pretokenizer = read_pre_tokenizer(r, j["pre_tokenizer"]);
    r.require_unset(j, "normalizer", "", "no normalizer is implemented");

    const auto& model = j["model"];
    const std::string m = "model";
    r.require_unset(model, "dropout", m, "BPE dropout is random");
    r.require_unset(model, "unk_token", m, "byte-level BPE has no unknown token");
    r.require_unset(model, "continuing_subword_prefix", m, "byte-level BPE has none", "");
    r.require_unset(model, "end_of_word_suffix", m, "byte-level BPE has none", "");
    if (r.bool_at(model, "fuse_unk", false, m)) throw r.fail("model.fuse_unk", "true is not supported");
    if (r.bool_at(model, "byte_fallback", false, m)) throw r.fail("model.byte_fallback", "true is not supported");
    list.whole_word_first = r.bool_at(model, "ignore_merges", false, m);

    const auto* decoder = Reader::get(j, "decoder");
    if (!decoder || !decoder->is_object() || decoder->value("type", "") != "ByteLevel")
        throw r.fail("decoder", "must be {\"type\": \"ByteLevel\"} (ids decode to the bytes of their tokens)");
    if (const auto* pp = Reader::get(j, "post_processor")) read_post_processor(r, *pp, "post_processor", list);

    const auto* vocab = Reader::get(model, "vocab");
    if (!vocab || !vocab->is_object()) throw r.fail("model.vocab", "missing or not an object");
    const auto* merges = Reader::get(model, "merges");
    if (!merges || !merges->is_array()) throw r.fail("model.merges", "missing or not an array");
    std::unordered_map<std::string, uint32_t> by_text;
    by_text.reserve(vocab->size());
    list.ranks.reserve(vocab->size());
    std::string bytes;
    for (const auto& [key, id] : vocab->items()) {
        if (!id.is_number_unsigned())
            throw r.fail(fmt::format("model.vocab entry {}", list.ranks.size()), "id is not a non-negative integer");
        const auto v = id.get<uint64_t>();
        if (v >= kNoToken) throw r.fail("model.vocab", fmt::format("id {} is out of range", v));
        // Token text stays out of messages (the file may be something else named by mistake).
        if (!decode_byte_level(key, bytes))
            throw r.fail("model.vocab", fmt::format("the token with id {} has a character outside the byte-level "
                                                    "alphabet",
                                                    v));
        by_text.emplace(key, static_cast<uint32_t>(v));
        list.ranks.emplace_back(bytes, static_cast<uint32_t>(v));
    }
    list.merges.reserve(merges->size());
    std::string left, right;
    for (std::size_t i = 0; i < merges->size(); ++i) {
        const auto& mg = (*merges)[i];
        std::string l, rt;
        if (mg.is_string()) {
            const std::string s = mg.get<std::string>();
            const std::size_t sp = s.find(' ');
            if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
                throw r.fail(fmt::format("model.merges[{}]", i), "expected \"LEFT RIGHT\"");
            l = s.substr(0, sp);
            rt = s.substr(sp + 1);
        } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {
            l = mg[0].get<std::string>();
            rt = mg[1].get<std::string>();
        } else {
            throw r.fail(fmt::format("model.merges[{}]", i), "expected \"LEFT RIGHT\" or [LEFT, RIGHT]");
        }
        if (!decode_byte_level(l, left) || !decode_byte_level(rt, right))
            throw r.fail(fmt::format("model.merges[{}]", i), "has a character outside the byte-level alphabet");
        list.merges.emplace_back(left, right);
    }

    const auto* added = Reader::get(j, "added_tokens");
    if (added && !added->is_array()) throw r.fail("added_tokens", "is not an array");
    std::unordered_set<std::string> added_texts;
    for (std::size_t i = 0; added && i < added->size(); ++i) {
        const auto& t = (*added)[i];
        const std::string at = fmt::format("added_tokens[{}]", i);
        if (!t.is_object()) throw r.fail(at, "is not an object");
        const std::string content = r.string_at(t, "content", at);
        const auto* id = Reader::get(t, "id");
        if (!id || !id->is_number_unsigned() || id->get<uint64_t>() >= kNoToken)
            throw r.fail(at + ".id", "missing or not a token id");
        // lstrip / rstrip / single_word change where a token matches; none is implemented, so a file that
        // sets one is refused rather than matched differently. `normalized` only matters with a normalizer.
        for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
            if (r.bool_at(t, flag, false, at)) throw r.fail(at + "." + flag, "true is not supported");
        }
        if (content.empty()) throw r.fail(at + ".content", "is empty");
        if (!added_texts.insert(content).second) throw r.fail(at + ".content", "appears twice in added_tokens");
        const uint32_t v = id->get<uint32_t>();
        // An added token may also be in model.vocab (GPT-2's <|endoftext|> is): then with the same id.
        if (auto it = by_text.find(content); it != by_text.end() && it->second != v)
            throw r.fail(at, fmt::format("has id {} but model.vocab gives the same token id {}", v, it->second));
        list.specials.push_back({content, v, r.bool_at(t, "special", false, at)});
    }
    // The token that ends documents in training data and generation: GPT-2's or Llama 3's name for it.
    list.eot_text.clear();
    for (const char* name : {"<|end_of_text|>", "<|endoftext|>"}) {
        for (const auto& a : list.specials)
            if (list.eot_text.empty() && a.text == name) list.eot_text = name;
    }
    if (list.eot_text.empty())
        throw r.fail("added_tokens", "has neither <|end_of_text|> nor <|endoftext|> (the end-of-text token)");
    return list;
}

}  // namespace llmt::data
