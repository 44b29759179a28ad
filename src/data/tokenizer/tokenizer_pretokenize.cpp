// GPT-2's and Llama 3's pre-tokenizers as small state machines over UTF-8 (see tokenizer_pretokenize.h
// for the regexes). Each branch below names the regex alternative it implements; the order of the checks
// is the order of the alternation, which is what makes leftmost-first matching come out the same.
#include "data/tokenizer/tokenizer_pretokenize.h"

#include <array>

#include "data/tokenizer/unicode_class.h"

namespace llmt::data {
namespace {

using uchar = unsigned char;

constexpr std::array<CharClass, 128> make_ascii_classes() {
    std::array<CharClass, 128> t{};
    for (int c = 0; c < 128; ++c) {
        CharClass k = CharClass::kOther;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) k = CharClass::kLetter;
        if (c >= '0' && c <= '9') k = CharClass::kNumber;
        // White_Space in ASCII: TAB LF VT FF CR (9-13), FS GS RS US are not; SPACE.
        if ((c >= 9 && c <= 13) || c == ' ') k = CharClass::kSpace;
        t[c] = k;
    }
    return t;
}
constexpr std::array<CharClass, 128> kAscii = make_ascii_classes();

inline CharClass class_at(const uchar* s, std::size_t n, std::size_t i, std::size_t* len) {
    if (s[i] < 0x80) {
        *len = 1;
        return kAscii[s[i]];
    }
    return char_class(decode_utf8(s + i, n - i, len));  // invalid: 0xFFFFFFFF -> kOther
}

// End of the run of characters of class `k` that starts at i.
inline std::size_t scan_run(const uchar* s, std::size_t n, std::size_t i, CharClass k) {
    while (i < n) {
        if (s[i] < 0x80) {
            if (kAscii[s[i]] != k) break;
            ++i;
            continue;
        }
        std::size_t len;
        if (class_at(s, n, i, &len) != k) break;
        i += len;
    }
    return i;
}

}  // namespace

std::size_t gpt2_next_piece(std::string_view text, std::size_t pos) {
    const auto* s = reinterpret_cast<const uchar*>(text.data());
    const std::size_t n = text.size();
    const uchar c = s[pos];
    // 's|'t|'re|'ve|'m|'ll|'d  (case-sensitive, ASCII apostrophe only)
    if (c == '\'' && pos + 1 < n) {
        const uchar d = s[pos + 1];
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return pos + 2;
        if (pos + 2 < n) {
            const uchar e = s[pos + 2];
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return pos + 3;
        }
    }
    // ' ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+' with the optional space (U+0020 only) present.
    if (c == ' ' && pos + 1 < n) {
        std::size_t len2;
        const CharClass k2 = class_at(s, n, pos + 1, &len2);
        if (k2 != CharClass::kSpace) return scan_run(s, n, pos + 1 + len2, k2);
    }
    std::size_t len;
    const CharClass k = class_at(s, n, pos, &len);
    // The same three alternatives without the space.
    if (k != CharClass::kSpace) return scan_run(s, n, pos + len, k);
    // '\s+(?!\S)|\s+': the greedy run; when a non-space follows, backtrack one character so that the
    // lookahead sees whitespace, unless the run is a single character (then '\s+' takes it).
    std::size_t last = pos;
    std::size_t i = pos + len;
    while (i < n) {
        std::size_t l;
        if (class_at(s, n, i, &l) != CharClass::kSpace) break;
        last = i;
        i += l;
    }
    if (i == n) return n;
    return last > pos ? last : i;
}

std::size_t llama3_next_piece(std::string_view text, std::size_t pos) {
    const auto* s = reinterpret_cast<const uchar*>(text.data());
    const std::size_t n = text.size();
    const uchar c = s[pos];
    // (?i:'s|'t|'re|'ve|'m|'ll|'d): ASCII apostrophe only; `| 0x20` lower-cases exactly the ASCII letters
    // among the bytes it can map onto s, t, m, d, r, e, v, l (it only clears the difference A-Z / a-z).
    if (c == '\'' && pos + 1 < n) {
        const uchar d = s[pos + 1] | 0x20;
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return pos + 2;
        if (s[pos + 1] == 0xC5 && pos + 2 < n && s[pos + 2] == 0xBF) return pos + 3;  // 'ſ (U+017F folds to s)
        if (pos + 2 < n) {
            const uchar e = s[pos + 2] | 0x20;
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return pos + 3;
        }
    }
    std::size_t len;
    const CharClass k = class_at(s, n, pos, &len);
    // [^\r\n\p{L}\p{N}]?\p{L}+: a letter run, or one character that is not CR, LF, a letter or a number
    // (whitespace included) followed by a letter run.
    if (k == CharClass::kLetter) return scan_run(s, n, pos + len, CharClass::kLetter);
    if (k != CharClass::kNumber && c != '\r' && c != '\n' && pos + len < n) {
        std::size_t len2;
        if (class_at(s, n, pos + len, &len2) == CharClass::kLetter)
            return scan_run(s, n, pos + len + len2, CharClass::kLetter);
    }
    // \p{N}{1,3}
    if (k == CharClass::kNumber) {
        std::size_t i = pos + len;
        for (int more = 0; more < 2 && i < n; ++more) {
            std::size_t l;
            if (class_at(s, n, i, &l) != CharClass::kNumber) break;
            i += l;
        }
        return i;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*': an "other" run, after an optional U+0020, then every CR and LF after it.
    std::size_t run_from = std::string_view::npos;
    if (k == CharClass::kOther) {
        run_from = pos + len;
    } else if (c == ' ' && pos + 1 < n) {
        std::size_t len2;
        if (class_at(s, n, pos + 1, &len2) == CharClass::kOther) run_from = pos + 1 + len2;
    }
    if (run_from != std::string_view::npos) {
        std::size_t i = scan_run(s, n, run_from, CharClass::kOther);
        while (i < n && (s[i] == '\r' || s[i] == '\n')) ++i;
        return i;
    }
    // Whitespace from here on (k == kSpace). Let W be the whole whitespace run.
    // \s*[\r\n]+: when W holds a CR or LF, the greedy \s* backs off to the last one; [\r\n]+ takes it
    // (whatever follows it in W is not CR/LF).
    std::size_t last_nl = std::string_view::npos;
    std::size_t last = pos;  // start of W's last character
    std::size_t i = pos;
    while (i < n) {
        std::size_t l;
        if (class_at(s, n, i, &l) != CharClass::kSpace) break;
        if (s[i] == '\r' || s[i] == '\n') last_nl = i;
        last = i;
        i += l;
    }
    if (last_nl != std::string_view::npos) return last_nl + 1;
    // \s+(?!\S)|\s+: as for GPT-2 (W up to the end of the text; else W without its last character, unless
    // W is one character).
    if (i == n) return n;
    return last > pos ? last : i;
}

std::vector<std::string_view> llama3_pretokenize(std::string_view text) {
    std::vector<std::string_view> pieces;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const std::size_t end = llama3_next_piece(text, pos);
        pieces.push_back(text.substr(pos, end - pos));
        pos = end;
    }
    return pieces;
}

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
    std::vector<std::string_view> pieces;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const std::size_t end = gpt2_next_piece(text, pos);
        pieces.push_back(text.substr(pos, end - pos));
        pos = end;
    }
    return pieces;
}

}  // namespace llmt::data
