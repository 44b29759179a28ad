// SigV4 and its primitives against published vectors and AWS's own signer: MD5 (RFC 1321 appendix
// A.5), HMAC-SHA256 (RFC 4231 test case 2), the S3 API reference's GET Object example
// (sig-v4-header-based-auth: examplebucket, 20130524), and botocore's S3SigV4Auth (python3-botocore)
// on a multipart-part PUT with a session token, a range and a key that needs encoding.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/sha256.h"
#include "storage/md5.h"
#include "storage/s3_uri.h"
#include "storage/sigv4.h"
#include "support/subprocess.h"

namespace llmt::storage {
namespace {

std::string hex(const std::string& raw) { return to_hex(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()); }

TEST(Md5, Rfc1321Vectors) {
    EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
    EXPECT_EQ(md5_hex("abc"), "900150983cd24fb0d6963f7d28e17f72");
    EXPECT_EQ(md5_hex("message digest"), "f96b697d7cb7938d525a2f31aaf161d0");
    EXPECT_EQ(md5_hex("12345678901234567890123456789012345678901234567890123456789012345678901234567890"),
              "57edf4a22be3c955ac49da2e2107b67a");
}

TEST(Md5, Base64OfDigest) {
    const auto d = md5("");
    EXPECT_EQ(to_base64(d.data(), d.size()), "1B2M2Y8AsgTpgAmY7PhCfg==");
}

TEST(HmacSha256, Rfc4231Case2) {
    EXPECT_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(SigV4, AwsGetObjectExample) {
    SigV4Request r;
    r.method = "GET";
    r.canonical_uri = "/test.txt";
    r.payload_sha256 = sha256_hex("");
    r.headers = {{"host", "examplebucket.s3.amazonaws.com"},
                 {"range", "bytes=0-9"},
                 {"x-amz-content-sha256", r.payload_sha256},
                 {"x-amz-date", "20130524T000000Z"}};
    const Credentials c{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
    EXPECT_EQ(sha256_hex(canonical_request(r)), "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
    EXPECT_EQ(authorization_header(r, c, "20130524T000000Z", "us-east-1"),
              "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
              "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
              "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4, UriEncoding) {
    EXPECT_EQ(uri_encode("dir/a b+c~_.-é", true), "dir/a%20b%2Bc~_.-%C3%A9");
    EXPECT_EQ(uri_encode("a/b", false), "a%2Fb");
}

TEST(SigV4, MatchesBotocore) {
    const std::string body = "part bytes\x01\x02";
    const std::string amz_date = "20261127T153000Z";
    const Credentials c{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "FQoGZXIvYXdzEXAMPLETOKEN/+="};
    SigV4Request r;
    r.method = "PUT";
    r.canonical_uri = "/my-bucket/" + uri_encode("runs/a b+c/model.safetensors", true);
    r.query = {{"partNumber", "3"}, {"uploadId", "Zx.y~z/+="}};
    r.payload_sha256 = sha256_hex(body);
    r.headers = {{"host", "127.0.0.1:4568"},
                 {"content-md5", "rL0Y20zC+Fzt72VPzMSk2A=="},
                 {"x-amz-content-sha256", r.payload_sha256},
                 {"x-amz-date", amz_date},
                 {"x-amz-security-token", c.session_token}};
    std::string url =
        "http://127.0.0.1:4568" + r.canonical_uri + "?partNumber=3&uploadId=" + uri_encode("Zx.y~z/+=", false);
    nlohmann::json spec = {{"method", "PUT"},
                           {"url", url},
                           {"headers", {{"Content-MD5", "rL0Y20zC+Fzt72VPzMSk2A=="}}},
                           {"body", body},
                           {"access_key", c.access_key_id},
                           {"secret_key", c.secret_access_key},
                           {"token", c.session_token},
                           {"region", "eu-west-3"},
                           {"amz_date", amz_date}};
    const auto res = testing::run_process(
        {"python3", std::string(LLMT_SOURCE_DIR) + "/tests/storage/botocore_sign.py"}, spec.dump(), 60);
    ASSERT_EQ(res.exit_code, 0) << res.err << "\n(hint: scripts/setup.sh installs python3-botocore)";
    std::string theirs = res.out;
    while (!theirs.empty() && theirs.back() == '\n') theirs.pop_back();
    EXPECT_EQ(authorization_header(r, c, amz_date, "eu-west-3"), theirs);
}

TEST(S3Uri, ParsesAndRefuses) {
    const S3Uri u = parse_s3_uri("s3://my-bucket/runs/x", "output.sync");
    EXPECT_EQ(u.bucket, "my-bucket");
    EXPECT_EQ(u.key, "runs/x");
    EXPECT_EQ(u.join("/ckpt").str(), "s3://my-bucket/runs/x/ckpt");
    EXPECT_EQ(parse_s3_uri("s3://my-bucket", "k").join("a").key, "a");
    for (const char* bad : {"s3://A_B/x", "s3://ab/x", "http://bucket/x", "s3://bucket/a//b", "s3://bucket/../x"}) {
        try {
            parse_s3_uri(bad, "output.sync");
            ADD_FAILURE() << bad;
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find("output.sync"), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace llmt::storage
