// GPT-2 pre-tokenizer as a small state machine over UTF-8 (see tokenizer_pretokenize.h for the regex).
// Each branch below names the regex alternative it implements; the order of the checks is the order of
// the alternation, which is what makes leftmost-first matching come out the same.
#include "data/tokenizer_pretokenize.h"

#include <array>

#include "data/unicode_class.h"

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
