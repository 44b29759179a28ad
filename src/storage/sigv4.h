// AWS Signature Version 4 for S3 requests (header form), written over core/sha256.h: the canonical
// request, the string to sign, the derived signing key and the Authorization header, as in AWS's
// "Signature Calculations for the Authorization Header" (S3 API reference, sig-v4-header-based-auth).
// Why ours and not a library: docs/architecture.md "Object storage".
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace llmt::storage {

struct Credentials {
    std::string access_key_id;
    std::string secret_access_key;
    std::string session_token;  // empty unless temporary credentials (sent as x-amz-security-token)
};

struct SigV4Request {
    std::string method;          // "GET", "PUT", ...
    std::string canonical_uri;   // the path, already URI-encoded (uri_encode(path, false))
    std::map<std::string, std::string> query;    // decoded names and values; encoded and sorted when signed
    std::map<std::string, std::string> headers;  // lowercase names; every one is signed (host included)
    std::string payload_sha256;  // hex; also the x-amz-content-sha256 header's value
};

// HMAC-SHA256 (RFC 2104) of `data` under `key`: 32 raw bytes.
std::string hmac_sha256(std::string_view key, std::string_view data);

// S3's URI encoding: unreserved characters (A-Z a-z 0-9 - . _ ~) kept, everything else %XX (uppercase);
// '/' kept when `keep_slash` (object key paths).
std::string uri_encode(std::string_view s, bool keep_slash);

// The pieces, exposed so tests can compare each with AWS's published example.
std::string canonical_request(const SigV4Request& r);
std::string string_to_sign(const SigV4Request& r, std::string_view amz_date, std::string_view region);
std::string signature(const SigV4Request& r, const Credentials& c, std::string_view amz_date, std::string_view region);

// "AWS4-HMAC-SHA256 Credential=<id>/<date>/<region>/s3/aws4_request, SignedHeaders=..., Signature=...".
// `amz_date` is the x-amz-date header's value (YYYYMMDD'T'HHMMSS'Z'), which r.headers must hold.
std::string authorization_header(const SigV4Request& r, const Credentials& c, std::string_view amz_date,
                                 std::string_view region);

}  // namespace llmt::storage
