// The tokenizer fuzz body, shared by the libFuzzer target (tokenizer_fuzz.cpp) and the short seeded
// gtest run (tests/data/tokenizer_fuzz_test.cpp). For any bytes: decode(encode(b)) == b (valid UTF-8
// or not: invalid bytes are encoded byte-wise), ids are in range, and the hand-written pre-tokenizers
// split exactly like literal, slow transcriptions of GPT-2's and Llama 3's regexes (the oracles below).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/tokenizer_pretokenize.h"
#include "data/tokenizer/unicode_class.h"

namespace llmt::fuzz {

// The tokenizer under test: $LLMTRAIN_FUZZ_TOKENIZER, else "gpt2" (the checkout's data/tokenizers after
// scripts/setup.sh), else the shared reference copy beside the checkout.
inline const data::Tokenizer& fuzz_tokenizer() {
    static const data::Tokenizer tok = [] {
        std::vector<std::string> specs;
        if (const char* env = std::getenv("LLMTRAIN_FUZZ_TOKENIZER")) specs.push_back(env);
        specs.push_back("gpt2");
        const std::string here = __FILE__;  // .../tests/fuzz/tokenizer_fuzz_body.h
        specs.push_back(here.substr(0, here.rfind("/tests/fuzz/")) + "/../shared/data/gpt2.tiktoken");
        std::string errors;
        for (const auto& s : specs) {
            try {
                return data::Tokenizer::load(s);
            } catch (const std::exception& e) {
                errors += std::string("\n  ") + e.what();
            }
        }
        std::fprintf(stderr, "tokenizer_fuzz: no tokenizer could be loaded:%s\n", errors.c_str());
        std::abort();
    }();
    return tok;
}

[[noreturn]] inline void fuzz_fail(const char* what, std::string_view input) {
    std::fprintf(stderr, "tokenizer_fuzz: %s; input (%zu bytes) hex:", what, input.size());
    for (unsigned char c : input) std::fprintf(stderr, " %02x", c);
    std::fprintf(stderr, "\n");
    std::abort();
}

// A decoded character of the oracles' input: code point, class and byte offset.
struct OracleChar {
    uint32_t cp;
    data::CharClass cls;
    std::size_t off;
};
inline std::vector<OracleChar> oracle_chars(std::string_view text) {
    std::vector<OracleChar> cs;
    for (std::size_t i = 0; i < text.size();) {
        std::size_t len;
        const uint32_t cp =
            data::decode_utf8(reinterpret_cast<const unsigned char*>(text.data()) + i, text.size() - i, &len);
        cs.push_back({cp, data::char_class(cp), i});
        i += len;
    }
    return cs;
}

// \s+(?!\S)|\s+ at i, the run of spaces ending at k: backtracking, the longest part of the run followed by a
// space or the end of the text, else the whole run.
inline std::size_t oracle_space_run_end(const std::vector<OracleChar>& cs, std::size_t i, std::size_t k) {
    for (std::size_t e = k; e > i; --e)
        if (e == cs.size() || cs[e].cls == data::CharClass::kSpace) return e;
    return k;
}

// GPT-2's regex transcribed alternative by alternative over decoded characters, with the backtracking
// spelled out: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
inline std::vector<std::string_view> oracle_pretokenize(std::string_view text) {
    const std::vector<OracleChar> cs = oracle_chars(text);
    const std::size_t n = cs.size();
    auto off = [&](std::size_t k) { return k < n ? cs[k].off : text.size(); };
    auto lit = [&](std::size_t k, std::string_view s) {
        for (std::size_t j = 0; j < s.size(); ++j)
            if (k + j >= n || cs[k + j].cp != static_cast<unsigned char>(s[j])) return false;
        return true;
    };
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < n) {
        std::size_t end = 0;
        for (std::string_view c : {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"}) {
            if (lit(i, c)) {
                end = i + c.size();
                break;
            }
        }
        for (auto cls : {data::CharClass::kLetter, data::CharClass::kNumber, data::CharClass::kOther}) {
            if (end) break;
            for (std::size_t start : {i + (cs[i].cp == ' ' ? 1 : 0), i}) {  // ` ?` tries the space first
                std::size_t k = start;
                while (k < n && cs[k].cls == cls) ++k;
                if (k > start) {
                    end = k;
                    break;
                }
            }
        }
        if (!end) {
            std::size_t k = i;
            while (k < n && cs[k].cls == data::CharClass::kSpace) ++k;
            end = oracle_space_run_end(cs, i, k);
        }
        if (end <= i) fuzz_fail("oracle made no progress", text);
        out.push_back(text.substr(off(i), off(end) - off(i)));
        i = end;
    }
    return out;
}

// Llama 3's regex transcribed the same way:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Case-insensitive matching compares simple case folds (A-Z to a-z, U+017F to s).
inline std::vector<std::string_view> oracle_llama3_pretokenize(std::string_view text) {
    const std::vector<OracleChar> cs = oracle_chars(text);
    const std::size_t n = cs.size();
    auto off = [&](std::size_t k) { return k < n ? cs[k].off : text.size(); };
    auto fold = [](uint32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp == 0x17F ? uint32_t{'s'} : cp; };
    auto is = [&](std::size_t k, data::CharClass c) { return k < n && cs[k].cls == c; };
    auto crlf = [&](std::size_t k) { return k < n && (cs[k].cp == '\r' || cs[k].cp == '\n'); };
    auto run = [&](std::size_t k, data::CharClass c) {
        while (is(k, c)) ++k;
        return k;
    };
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < n) {
        std::size_t end = 0;
        if (cs[i].cp == '\'') {
            for (std::string_view c : {"s", "t", "re", "ve", "m", "ll", "d"}) {
                bool ok = i + c.size() < n;
                for (std::size_t j = 0; ok && j < c.size(); ++j)
                    ok = fold(cs[i + 1 + j].cp) == static_cast<unsigned char>(c[j]);
                if (ok) {
                    end = i + 1 + c.size();
                    break;
                }
            }
        }
        // [^\r\n\p{L}\p{N}]?\p{L}+ : the optional character first, then without it.
        if (!end && !crlf(i) && !is(i, data::CharClass::kLetter) && !is(i, data::CharClass::kNumber) &&
            is(i + 1, data::CharClass::kLetter))
            end = run(i + 1, data::CharClass::kLetter);
        if (!end && is(i, data::CharClass::kLetter)) end = run(i, data::CharClass::kLetter);
        if (!end && is(i, data::CharClass::kNumber)) {  // \p{N}{1,3}
            end = i + 1;
            while (end < i + 3 && is(end, data::CharClass::kNumber)) ++end;
        }
        if (!end) {  //  ?[^\s\p{L}\p{N}]+[\r\n]*
            for (std::size_t start : {i + (cs[i].cp == ' ' ? 1 : 0), i}) {
                const std::size_t k = run(start, data::CharClass::kOther);
                if (k > start) {
                    end = k;
                    while (crlf(end)) ++end;
                    break;
                }
            }
        }
        if (!end) {
            const std::size_t k = run(i, data::CharClass::kSpace);
            for (std::size_t e = k + 1; e-- > i && !end;) {  // \s*[\r\n]+: \s* backtracks from the longest
                if (crlf(e)) {
                    end = e;
                    while (crlf(end)) ++end;
                }
            }
            if (!end) end = oracle_space_run_end(cs, i, k);
        }
        if (end <= i) fuzz_fail("llama3 oracle made no progress", text);
        out.push_back(text.substr(off(i), off(end) - off(i)));
        i = end;
    }
    return out;
}

inline void fuzz_tokenizer_one(const uint8_t* data, std::size_t size) {
    const data::Tokenizer& tok = fuzz_tokenizer();
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (data::gpt2_pretokenize(text) != oracle_pretokenize(text))
        fuzz_fail("pre-tokenizer differs from the oracle", text);
    if (data::llama3_pretokenize(text) != oracle_llama3_pretokenize(text))
        fuzz_fail("Llama 3 pre-tokenizer differs from its oracle", text);
    const auto ids = tok.encode_ordinary(text);
    for (uint32_t id : ids) {
        if (id >= tok.vocab_size()) fuzz_fail("id out of range", text);
        if (id == tok.eot_token()) fuzz_fail("special token from encode_ordinary", text);
    }
    if (tok.decode(ids) != text) fuzz_fail("decode(encode_ordinary(x)) != x", text);
    const auto special = tok.encode(text, true);
    if (tok.decode(special) != text) fuzz_fail("decode(encode(x, allow_special)) != x", text);
    if (size >= 48 && (data[0] & 1)) {
        // Parallel encoding with tiny chunks must equal the sequential one.
        if (data::encode_parallel(tok, text, true, 2, 8) != special) fuzz_fail("encode_parallel differs", text);
    }
}

}  // namespace llmt::fuzz
