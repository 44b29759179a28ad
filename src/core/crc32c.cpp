// CRC-32C (crc32c.h). The hardware path runs three independent crc32 streams over three adjacent blocks
// (the instruction has a latency of 3 cycles and a throughput of 1, so one stream leaves two thirds of
// the unit idle) and joins them with the shift identity crc(A||B) = crc(A) * x^(8|B|) xor crc(B),
// multiplication modulo the polynomial as in zlib's crc32_combine.
#include "core/crc32c.h"

#include <fmt/format.h>

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace llmt {
namespace {

constexpr std::uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

// Slicing-by-8 tables: kTables[k][b] is the CRC of byte b followed by k zero bytes.
struct Tables {
    std::array<std::array<std::uint32_t, 256>, 8> t{};
    Tables() {
        for (std::uint32_t b = 0; b < 256; ++b) {
            std::uint32_t c = b;
            for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
            t[0][b] = c;
        }
        for (std::uint32_t b = 0; b < 256; ++b)
            for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
    }
};
const Tables& tables() {
    static const Tables t;
    return t;
}

// The raw register update (no pre/post inversion) over n bytes, in software.
std::uint32_t update_sw(std::uint32_t r, const std::uint8_t* p, std::size_t n) {
    const auto& t = tables().t;
    while (n >= 8) {
        std::uint64_t w;
        std::memcpy(&w, p, 8);  // little-endian host (x86-64, aarch64)
        w ^= r;
        r = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^ t[4][(w >> 24) & 0xff] ^
            t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^ t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) r = (r >> 8) ^ t[0][(r ^ *p++) & 0xff];
    return r;
}

// a * b modulo the polynomial, both reflected (zlib's multmodp).
std::uint32_t mult_mod_p(std::uint32_t a, std::uint32_t b) {
    std::uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
    }
    return p;
}

// x^(8 n) modulo the polynomial: what a register is multiplied by when n zero bytes pass through it.
std::uint32_t x_pow_8n(std::uint64_t n) {
    std::uint32_t result = 1u << 31;  // x^0
    std::uint32_t sq = 1u << 23;      // x^8 (bit 31 - 8)
    while (n) {
        if (n & 1) result = mult_mod_p(sq, result);
        sq = mult_mod_p(sq, sq);
        n >>= 1;
    }
    return result;
}

#if defined(__x86_64__)
constexpr std::size_t kBlock = 32 << 10;  // bytes per stream per round

__attribute__((target("sse4.2"))) std::uint32_t update_one_hw(std::uint32_t r, const std::uint8_t* p,
                                                              std::size_t n) {
    std::uint64_t r64 = r;
    while (n >= 8) {
        std::uint64_t w;
        std::memcpy(&w, p, 8);
        r64 = _mm_crc32_u64(r64, w);
        p += 8;
        n -= 8;
    }
    r = static_cast<std::uint32_t>(r64);
    while (n--) r = _mm_crc32_u8(r, *p++);
    return r;
}

__attribute__((target("sse4.2"))) std::uint32_t update_hw(std::uint32_t r, const std::uint8_t* p, std::size_t n) {
    static const std::uint32_t shift1 = x_pow_8n(kBlock), shift2 = x_pow_8n(2 * kBlock);
    while (n >= 3 * kBlock) {
        std::uint64_t a = r, b = 0, c = 0;
        const std::uint8_t* pa = p;
        const std::uint8_t* pb = p + kBlock;
        const std::uint8_t* pc = p + 2 * kBlock;
        for (std::size_t i = 0; i < kBlock; i += 8) {
            std::uint64_t wa, wb, wc;
            std::memcpy(&wa, pa + i, 8);
            std::memcpy(&wb, pb + i, 8);
            std::memcpy(&wc, pc + i, 8);
            a = _mm_crc32_u64(a, wa);
            b = _mm_crc32_u64(b, wb);
            c = _mm_crc32_u64(c, wc);
        }
        r = mult_mod_p(shift2, static_cast<std::uint32_t>(a)) ^ mult_mod_p(shift1, static_cast<std::uint32_t>(b)) ^
            static_cast<std::uint32_t>(c);
        p += 3 * kBlock;
        n -= 3 * kBlock;
    }
    return update_one_hw(r, p, n);
}

bool detect_sse42() { return __builtin_cpu_supports("sse4.2"); }
#else
bool detect_sse42() { return false; }
#endif

}  // namespace

bool crc32c_hardware() {
    static const bool hw = detect_sse42();
    return hw;
}

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t n) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    std::uint32_t r = ~crc;
#if defined(__x86_64__)
    if (crc32c_hardware()) return ~update_hw(r, p, n);
#endif
    return ~update_sw(r, p, n);
}

std::string crc32c_text(std::uint32_t crc) { return fmt::format("crc32c:{:08x}", crc); }

bool parse_crc32c_text(std::string_view text, std::uint32_t* out) {
    constexpr std::string_view kPrefix = "crc32c:";
    if (text.size() != kPrefix.size() + 8 || text.substr(0, kPrefix.size()) != kPrefix) return false;
    std::uint32_t v = 0;
    for (char ch : text.substr(kPrefix.size())) {
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0) return false;
        v = (v << 4) | static_cast<std::uint32_t>(d);
    }
    *out = v;
    return true;
}

}  // namespace llmt
