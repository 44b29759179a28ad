#include "storage/s3_client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>

#include "core/sha256.h"
#include "storage/md5.h"
#include "storage/sigv4.h"

namespace llmt::storage {

struct S3Client::Curl {
    CURL* h = nullptr;
};

struct S3Client::Call {
    std::string method;
    S3Uri uri;
    std::map<std::string, std::string> query;
    std::map<std::string, std::string> headers;  // lowercase names, signed
    std::string_view body;
    bool head = false;
};

namespace {

// --- XML: the few elements S3 answers carry, found by name (S3's answers have no attributes we need).

std::string xml_unescape(std::string s) {
    static const std::pair<const char*, const char*> entities[] = {
        {"&quot;", "\""}, {"&apos;", "'"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&#34;", "\""}, {"&amp;", "&"}};
    for (const auto& [from, to] : entities)
        for (size_t p; (p = s.find(from)) != std::string::npos;) s.replace(p, std::strlen(from), to);
    return s;
}

// The text of each <tag>...</tag> in `xml`, in order.
std::vector<std::string> xml_all(std::string_view xml, std::string_view tag) {
    std::vector<std::string> out;
    const std::string open = fmt::format("<{}>", tag), close = fmt::format("</{}>", tag);
    for (size_t p = 0; (p = xml.find(open, p)) != std::string_view::npos;) {
        const size_t start = p + open.size(), end = xml.find(close, start);
        if (end == std::string_view::npos) break;
        out.push_back(std::string(xml.substr(start, end - start)));
        p = end + close.size();
    }
    return out;
}

std::string xml_first(std::string_view xml, std::string_view tag) {
    auto all = xml_all(xml, tag);
    return all.empty() ? "" : xml_unescape(all.front());
}

std::string unquote(std::string s) {
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
    return s;
}

std::string amz_date_now() {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
    return buf;
}

// libcurl's progress callback: a non-zero answer aborts the transfer (cancel()).
int abort_if_cancelled(void* flag, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<const std::atomic<bool>*>(flag)->load() ? 1 : 0;
}

size_t append_body(char* ptr, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(ptr, size * n);
    return size * n;
}

size_t append_header(char* ptr, size_t size, size_t n, void* out) {
    std::string line(ptr, size * n);
    const auto colon = line.find(':');
    if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
        std::string value = line.substr(colon + 1);
        const auto b = value.find_first_not_of(" \t"), e = value.find_last_not_of(" \t\r\n");
        (*static_cast<std::map<std::string, std::string>*>(out))[name] =
            b == std::string::npos ? "" : value.substr(b, e - b + 1);
    }
    return size * n;
}

bool retryable(long status) { return status >= 500 || status == 429 || status == 408; }

std::string describe(const std::string& method, const S3Uri& uri, const S3Client::Response& r) {
    const std::string code = xml_first(r.body, "Code"), message = xml_first(r.body, "Message");
    return fmt::format("object storage: {} {}: HTTP {}{}{}", method, uri.str(), r.status,
                       code.empty() ? "" : " " + code, message.empty() ? "" : " (" + message + ")");
}

std::string md5_base64(std::string_view body) {
    const auto d = md5(body);
    return to_base64(d.data(), d.size());
}

// An ETag that is a plain MD5 (32 hex digits) must be the body's: S3 returns one for single-part objects
// and parts unless they are encrypted with SSE-KMS/SSE-C, whose ETags are not MD5s and are not checked.
void check_etag(const std::string& etag, std::string_view body, const std::string& what) {
    if (etag.size() != 32 || etag.find_first_not_of("0123456789abcdef") != std::string::npos) return;
    const std::string want = md5_hex(body);
    if (etag != want)
        throw StorageError(fmt::format("object storage: {}: the store's ETag {} is not the MD5 of the {} bytes sent "
                                       "({}): the data was changed on the way",
                                       what, etag, body.size(), want),
                           0, "BadDigest");
}

}  // namespace

S3Client::S3Client(S3Settings settings) : settings_(std::move(settings)), curl_(std::make_unique<Curl>()) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

S3Client::~S3Client() {
    if (curl_->h) curl_easy_cleanup(curl_->h);
}

S3Client::Response S3Client::send_once(const Call& call, std::string* transport_error) {
    CURL*& h = curl_->h;
    if (!h) h = curl_easy_init();
    if (!h) throw StorageError("object storage: curl_easy_init failed", 0, "");
    curl_easy_reset(h);

    // Where the request goes: path style (http://endpoint/bucket/key) or virtual-hosted (bucket.host/key).
    const auto scheme_end = settings_.endpoint.find("://") + 3;
    std::string host = settings_.endpoint.substr(scheme_end);
    std::string path = "/" + uri_encode(call.uri.key, true);
    if (settings_.path_style)
        path = "/" + call.uri.bucket + (call.uri.key.empty() ? "" : path);
    else
        host = call.uri.bucket + "." + host;
    SigV4Request sr;
    sr.method = call.method;
    sr.canonical_uri = path;
    sr.query = call.query;
    sr.headers = call.headers;
    sr.payload_sha256 = sha256_hex(call.body);
    const std::string amz_date = amz_date_now();
    sr.headers["host"] = host;
    sr.headers["x-amz-date"] = amz_date;
    sr.headers["x-amz-content-sha256"] = sr.payload_sha256;
    if (!settings_.credentials.session_token.empty())
        sr.headers["x-amz-security-token"] = settings_.credentials.session_token;
    const std::string auth = authorization_header(sr, settings_.credentials, amz_date, settings_.region);

    std::string url = settings_.endpoint.substr(0, scheme_end) + host + path;
    std::string query;
    for (const auto& [k, v] : call.query)
        query += (query.empty() ? "?" : "&") + uri_encode(k, false) + "=" + uri_encode(v, false);
    url += query;

    curl_slist* headers = nullptr;
    // Every signed header goes out as signed, Host included (curl would drop an explicit default port).
    for (const auto& [k, v] : sr.headers) headers = curl_slist_append(headers, (k + ": " + v).c_str());
    headers = curl_slist_append(headers, ("Authorization: " + auth).c_str());
    headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
    if (call.method == "PUT" || call.method == "POST")
        headers = curl_slist_append(headers, "Content-Type: application/octet-stream");

    Response r;
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    if (call.head) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (call.method == "PUT" || call.method == "POST") {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, call.body.data());
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(call.body.size()));
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, call.method.c_str());
    } else if (call.method != "GET") {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, call.method.c_str());
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, append_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &r.headers);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, settings_.connect_timeout_s);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, settings_.request_timeout_s);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, settings_.stall_timeout_s);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, abort_if_cancelled);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &cancelled_);
    const CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(headers);
    if (rc != CURLE_OK) {
        *transport_error = curl_easy_strerror(rc);
        return {};
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
    return r;
}

S3Client::Response S3Client::send(const Call& call) {
    double wait = settings_.backoff_s;
    std::string last;
    for (int attempt = 1;; ++attempt) {
        if (cancelled_.load())
            throw Cancelled(fmt::format("object storage: {} {}: cancelled", call.method, call.uri.str()));
        std::string transport_error;
        Response r = send_once(call, &transport_error);
        // CompleteMultipartUpload may answer 200 with an <Error> body (S3 API reference): a failure too.
        const bool error_body = r.status == 200 && r.body.find("<Error>") != std::string::npos;
        if (transport_error.empty() && !retryable(r.status) && !error_body) {
            if (r.status >= 300 && !(call.head && r.status == 404))
                throw StorageError(describe(call.method, call.uri, r), r.status, xml_first(r.body, "Code"));
            return r;
        }
        last = transport_error.empty()
                   ? describe(call.method, call.uri, r)
                   : fmt::format("object storage: {} {}: {}", call.method, call.uri.str(), transport_error);
        if (attempt >= settings_.max_attempts)
            throw StorageError(
                fmt::format("{} (gave up after {} attempts; endpoint {})", last, attempt, settings_.endpoint),
                r.status, xml_first(r.body, "Code"));
        // The backoff, in short naps so that cancel() is seen.
        const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait);
        while (!cancelled_.load() && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        wait = std::min(wait * 2, settings_.max_backoff_s);
    }
}

std::string S3Client::put_object(const S3Uri& uri, std::string_view body) {
    Call c{"PUT", uri, {}, {{"content-md5", md5_base64(body)}}, body};
    const std::string etag = unquote(send(c).headers["etag"]);
    check_etag(etag, body, "PUT " + uri.str());
    return etag;
}

std::string S3Client::create_multipart_upload(const S3Uri& uri) {
    Call c{"POST", uri, {{"uploads", ""}}, {}, {}};
    const Response r = send(c);
    const std::string id = xml_first(r.body, "UploadId");
    if (id.empty())
        throw StorageError(fmt::format("object storage: POST {}?uploads: the answer has no UploadId", uri.str()),
                           r.status, "");
    return id;
}

UploadedPart S3Client::upload_part(const S3Uri& uri, const std::string& upload_id, int number, std::string_view body) {
    Call c{"PUT",
           uri,
           {{"partNumber", std::to_string(number)}, {"uploadId", upload_id}},
           {{"content-md5", md5_base64(body)}},
           body};
    UploadedPart p{number, unquote(send(c).headers["etag"])};
    check_etag(p.etag, body, fmt::format("PUT {} part {}", uri.str(), number));
    return p;
}

void S3Client::complete_multipart_upload(const S3Uri& uri, const std::string& upload_id,
                                         const std::vector<UploadedPart>& parts) {
    std::string xml = "<CompleteMultipartUpload>";
    for (const auto& p : parts)
        xml += fmt::format("<Part><PartNumber>{}</PartNumber><ETag>\"{}\"</ETag></Part>", p.number, p.etag);
    xml += "</CompleteMultipartUpload>";
    Call c{"POST", uri, {{"uploadId", upload_id}}, {}, xml};
    send(c);
}

void S3Client::abort_multipart_upload(const S3Uri& uri, const std::string& upload_id) {
    Call c{"DELETE", uri, {{"uploadId", upload_id}}, {}, {}};
    send(c);
}

std::string S3Client::get_object(const S3Uri& uri, std::optional<std::pair<std::uint64_t, std::uint64_t>> range) {
    Call c{"GET", uri, {}, {}, {}};
    if (range) {
        if (range->second == 0) return "";
        c.headers["range"] = fmt::format("bytes={}-{}", range->first, range->first + range->second - 1);
    }
    Response r = send(c);
    if (range && r.body.size() != range->second)
        throw StorageError(fmt::format("object storage: GET {} bytes {}-{}: got {} bytes, expected {}", uri.str(),
                                       range->first, range->first + range->second - 1, r.body.size(), range->second),
                           r.status, "");
    return std::move(r.body);
}

std::optional<ObjectInfo> S3Client::head_object(const S3Uri& uri) {
    Call c{"HEAD", uri, {}, {}, {}};
    c.head = true;
    Response r = send(c);
    if (r.status == 404) return std::nullopt;
    ObjectInfo info{uri.key, 0, unquote(r.headers["etag"])};
    info.size = std::stoull(r.headers.count("content-length") ? r.headers["content-length"] : "0");
    return info;
}

std::vector<ObjectInfo> S3Client::list_objects(const S3Uri& prefix) {
    std::vector<ObjectInfo> out;
    std::string token;
    for (;;) {
        Call c{"GET", S3Uri{prefix.bucket, ""}, {{"list-type", "2"}, {"prefix", prefix.key}}, {}, {}};
        if (!token.empty()) c.query["continuation-token"] = token;
        const Response r = send(c);
        for (const auto& item : xml_all(r.body, "Contents"))
            out.push_back({xml_first(item, "Key"), std::stoull("0" + xml_first(item, "Size")),
                           unquote(xml_first(item, "ETag"))});
        token = xml_first(r.body, "NextContinuationToken");
        if (xml_first(r.body, "IsTruncated") != "true" || token.empty()) return out;
    }
}

void S3Client::delete_object(const S3Uri& uri) {
    Call c{"DELETE", uri, {}, {}, {}};
    send(c);
}

}  // namespace llmt::storage
