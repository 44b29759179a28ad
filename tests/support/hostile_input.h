// Hostile inputs shared by the tests that replay them (tests/config, tests/security, the fuzz smoke
// tests): the YAML alias bomb (docs/security.md, Bounded input) and the byte mutations of the short g++ fuzz runs.
#pragma once

#include <cstddef>
#include <random>
#include <string>

namespace llmt::testing {

// `levels` levels of nine aliases as a YAML mapping: a few hundred bytes that expand to 9^levels nodes
// (ten levels: 537 bytes; the report's was 538).
inline std::string yaml_alias_bomb(int levels = 10, const std::string& indent = "") {
    std::string s = indent + "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
    for (int i = 1; i < levels; ++i) {
        s += indent + "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
        for (int k = 0; k < 9; ++k) s += (k ? ", *a" : "*a") + std::to_string(i - 1);
        s += "]\n";
    }
    return s;
}

// The same bomb as one flow sequence, the shape of a --set / overrides value.
inline std::string yaml_alias_bomb_flow() {
    std::string value = "[&a [x, x, x, x, x, x, x, x, x]";
    for (int i = 1; i < 10; ++i) {
        value += ", &a" + std::to_string(i) + " [";
        for (int k = 0; k < 9; ++k) value += (k ? ", *a" : "*a") + (i == 1 ? std::string() : std::to_string(i - 1));
        value += "]";
    }
    return value + "]";
}

// 1-8 random edits of `s`: a byte from `alphabet` replaced or inserted, up to 16 bytes erased, or a
// random byte written.
inline std::string mutate_bytes(std::string s, const std::string& alphabet, std::mt19937_64& rng) {
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < edits && !s.empty(); ++k) {
        const std::size_t pos = rng() % s.size();
        switch (rng() % 4) {
            case 0: s[pos] = alphabet[rng() % alphabet.size()]; break;
            case 1: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
            case 2: s.erase(pos, 1 + rng() % 16); break;
            default: s[pos] = static_cast<char>(rng() & 0xFF); break;
        }
    }
    return s;
}

}  // namespace llmt::testing
