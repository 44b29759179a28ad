// An S3 client over libcurl for the calls llmtrain makes: PUT object, multipart upload (create, part,
// complete, abort), GET (whole or a byte range), HEAD, ListObjectsV2 and DELETE, each signed with SigV4
// (sigv4.h). 5xx, 429 and connection errors are retried with exponential backoff (S3Settings); other
// answers throw at once. Uploads send Content-MD5 and x-amz-content-sha256 (the store verifies them) and
// check the ETag the store returns against the MD5 of what was sent (single-part objects and parts).
// Thread safety: none, but cancel(); one client per thread (it keeps one curl handle and its connection).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "storage/s3_settings.h"
#include "storage/s3_uri.h"

namespace llmt::storage {

// A request the store refused, or one that still failed after every retry. what() names the method,
// the s3:// URI, the HTTP status and the store's error code and message (never the credentials).
class StorageError : public IoError {
public:
    StorageError(const std::string& msg, long status, std::string code)
        : IoError(msg), status_(status), code_(std::move(code)) {}
    long status() const { return status_; }          // 0: no answer (connection error)
    const std::string& code() const { return code_; }  // S3's <Code>, e.g. "NoSuchKey"; may be empty

private:
    long status_;
    std::string code_;
};

struct ObjectInfo {
    std::string key;
    std::uint64_t size = 0;
    std::string etag;  // without quotes
};

struct UploadedPart {
    int number = 0;
    std::string etag;  // without quotes
};

class S3Client {
public:
    explicit S3Client(S3Settings settings);
    ~S3Client();
    S3Client(const S3Client&) = delete;
    S3Client& operator=(const S3Client&) = delete;

    // Returns the ETag. Throws StorageError, also when the ETag is an MD5 that differs from the body's.
    std::string put_object(const S3Uri& uri, std::string_view body);
    std::string create_multipart_upload(const S3Uri& uri);  // the upload id
    UploadedPart upload_part(const S3Uri& uri, const std::string& upload_id, int number, std::string_view body);
    void complete_multipart_upload(const S3Uri& uri, const std::string& upload_id,
                                   const std::vector<UploadedPart>& parts);
    void abort_multipart_upload(const S3Uri& uri, const std::string& upload_id);
    // The whole object, or bytes [first, first + length) of it. Throws StorageError (404: code NoSuchKey).
    std::string get_object(const S3Uri& uri, std::optional<std::pair<std::uint64_t, std::uint64_t>> range = {});
    std::optional<ObjectInfo> head_object(const S3Uri& uri);  // nullopt on 404
    // Every object whose key starts with uri.key (all pages), in the store's (lexicographic) order.
    std::vector<ObjectInfo> list_objects(const S3Uri& prefix);
    void delete_object(const S3Uri& uri);

    const S3Settings& settings() const { return settings_; }

    // From any thread: the request in flight is aborted and every later one fails at once (Cancelled), so
    // an owner can stop a thread that is uploading to a stalled store without waiting for its retries.
    void cancel() { cancelled_.store(true); }

    struct Response {
        long status = 0;
        std::string body;
        std::map<std::string, std::string> headers;  // lowercase names
    };

private:
    struct Call;
    Response send(const Call& call);
    Response send_once(const Call& call, std::string* transport_error);

    S3Settings settings_;
    std::atomic<bool> cancelled_{false};
    struct Curl;
    std::unique_ptr<Curl> curl_;
};

}  // namespace llmt::storage
