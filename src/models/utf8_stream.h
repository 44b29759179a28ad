// Streaming decoded tokens as text: a GPT-2 token may end inside a multi-byte UTF-8 character (the
// byte-level BPE splits e.g. emoji across tokens), so the bytes of an incomplete trailing character
// are held back until the rest arrives. Bytes that can never complete (invalid UTF-8) pass through.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace llmt::models {

// Length of the longest prefix of `s` that does not end in the middle of a UTF-8 character: s.size()
// unless s ends with a lead byte followed by fewer continuation bytes than the lead announces.
inline std::size_t utf8_complete_prefix(std::string_view s) {
    const std::size_t n = s.size();
    // A character is at most 4 bytes: look back over up to 3 continuation bytes for its lead byte.
    for (std::size_t back = 1; back <= 4 && back <= n; ++back) {
        const auto b = static_cast<unsigned char>(s[n - back]);
        if ((b & 0xC0) == 0x80) continue;  // continuation byte
        std::size_t need = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
        return back < need ? n - back : n;  // ASCII, invalid lead bytes and complete characters: all
    }
    return n;  // only continuation bytes at the end: nothing can complete them
}

// Accumulates token bytes; take() returns what can be printed now, finish() the rest.
class Utf8Stream {
public:
    std::string take(std::string_view bytes) {
        pending_.append(bytes);
        std::size_t k = utf8_complete_prefix(pending_);
        std::string out = pending_.substr(0, k);
        pending_.erase(0, k);
        return out;
    }
    std::string finish() { return std::exchange(pending_, std::string()); }

private:
    std::string pending_;
};

}  // namespace llmt::models
