#include "storage/sigv4.h"

#include <fmt/format.h>

#include "core/sha256.h"

namespace llmt::storage {

namespace {

std::string hex_to_bytes(std::string_view hex) {
    auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    std::string out(hex.size() / 2, '\0');
    for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
    return out;
}

std::string hex_of(std::string_view bytes) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (unsigned char c : bytes) {
        s += digits[c >> 4];
        s += digits[c & 15];
    }
    return s;
}

std::string trim(std::string_view v) {
    const auto b = v.find_first_not_of(" \t");
    if (b == std::string_view::npos) return "";
    const auto e = v.find_last_not_of(" \t");
    return std::string(v.substr(b, e - b + 1));
}

std::string signed_headers(const SigV4Request& r) {
    std::string s;
    for (const auto& [name, value] : r.headers) s += (s.empty() ? "" : ";") + name;
    return s;
}

std::string scope(std::string_view amz_date, std::string_view region) {
    return fmt::format("{}/{}/s3/aws4_request", amz_date.substr(0, 8), region);
}

}  // namespace

std::string hmac_sha256(std::string_view key, std::string_view data) {
    std::string k(key);
    if (k.size() > 64) k = hex_to_bytes(sha256_hex(k));
    k.resize(64, '\0');
    std::string ipad(64, '\0'), opad(64, '\0');
    for (int i = 0; i < 64; ++i) {
        ipad[i] = static_cast<char>(k[i] ^ 0x36);
        opad[i] = static_cast<char>(k[i] ^ 0x5c);
    }
    const std::string inner = hex_to_bytes(sha256_hex(ipad + std::string(data)));
    return hex_to_bytes(sha256_hex(opad + inner));
}

std::string uri_encode(std::string_view s, bool keep_slash) {
    std::string out;
    for (unsigned char c : s) {
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
            c == '_' || c == '~' || (c == '/' && keep_slash))
            out += static_cast<char>(c);
        else
            out += fmt::format("%{:02X}", c);
    }
    return out;
}

std::string canonical_request(const SigV4Request& r) {
    std::string query;
    for (const auto& [name, value] : r.query)  // std::map: sorted by name, as SigV4 asks
        query += (query.empty() ? "" : "&") + uri_encode(name, false) + "=" + uri_encode(value, false);
    std::string headers;
    for (const auto& [name, value] : r.headers) headers += name + ":" + trim(value) + "\n";
    return fmt::format("{}\n{}\n{}\n{}\n{}\n{}", r.method, r.canonical_uri, query, headers, signed_headers(r),
                       r.payload_sha256);
}

std::string string_to_sign(const SigV4Request& r, std::string_view amz_date, std::string_view region) {
    return fmt::format("AWS4-HMAC-SHA256\n{}\n{}\n{}", amz_date, scope(amz_date, region),
                       sha256_hex(canonical_request(r)));
}

std::string signature(const SigV4Request& r, const Credentials& c, std::string_view amz_date,
                      std::string_view region) {
    std::string key = hmac_sha256("AWS4" + c.secret_access_key, amz_date.substr(0, 8));
    key = hmac_sha256(key, region);
    key = hmac_sha256(key, "s3");
    key = hmac_sha256(key, "aws4_request");
    return hex_of(hmac_sha256(key, string_to_sign(r, amz_date, region)));
}

std::string authorization_header(const SigV4Request& r, const Credentials& c, std::string_view amz_date,
                                 std::string_view region) {
    return fmt::format("AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={}", c.access_key_id,
                       scope(amz_date, region), signed_headers(r), signature(r, c, amz_date, region));
}

}  // namespace llmt::storage
