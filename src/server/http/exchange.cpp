// One exchange on a worker: body reading within limits, then the answer; see exchange.h.
#include "server/http/exchange.h"

#include <fmt/format.h>

#include "server/http/chunked_decoder.h"
#include "server/http/connection.h"
#include "server/http/http_error.h"

namespace llmt::server::http {

namespace {

std::chrono::milliseconds to_ms(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

// One of StreamSlots taken for the life of this object, when one is free and `wanted`.
class SlotHold {
public:
    SlotHold(StreamSlots& slots, bool wanted) : slots_(slots) {
        if (!wanted) return;
        if (slots_.used.fetch_add(1) < slots_.max) {
            held_ = true;
        } else {
            slots_.used.fetch_sub(1);
        }
    }
    ~SlotHold() {
        if (held_) slots_.used.fetch_sub(1);
    }
    SlotHold(const SlotHold&) = delete;
    SlotHold& operator=(const SlotHold&) = delete;
    bool held() const { return held_; }

private:
    StreamSlots& slots_;
    bool held_ = false;
};

bool needs_length(const std::string& method) { return method == "POST" || method == "PUT" || method == "PATCH"; }

// Reads the body the head announced into `out`, or throws HttpError without reading more than the limit.
void read_body(Connection& conn, const RequestHead& head, const Limits& limits, std::string* out) {
    if (!head.chunked && !head.content_length) {
        if (needs_length(head.method))
            throw HttpError(411, "length_required",
                            head.method + " needs a Content-Length header (or Transfer-Encoding: chunked)");
        return;
    }
    // We never inflate: a compressed body's size says nothing about what it decodes to.
    if (const std::string* enc = head.headers.find("Content-Encoding"); enc && !iequals(*enc, "identity"))
        throw HttpError(415, "unsupported_encoding",
                        fmt::format("Content-Encoding '{}' is not accepted; send the body uncompressed",
                                    enc->substr(0, 64)));
    const uint64_t max = limits.max_body_bytes;
    if (head.content_length && *head.content_length > max)
        throw HttpError(413, "payload_too_large",
                        fmt::format("the request body is {} bytes; the server's limit is {} (--max-body-bytes)",
                                    *head.content_length, max));
    if (head.expects_continue &&
        !conn.write_all("HTTP/1.1 100 Continue\r\n\r\n", to_ms(limits.write_timeout_s)))
        throw HttpError(400, "bad_request", "the client went away before sending its body");
    const auto deadline = Clock::now() + to_ms(limits.body_timeout_s);
    std::string& buf = conn.buffer();
    if (head.content_length) {
        const size_t want = static_cast<size_t>(*head.content_length);
        while (buf.size() < want)
            if (!conn.read_until(deadline, "the whole request body"))
                throw HttpError(400, "bad_request", "the connection closed before the request body ended");
        out->assign(buf, 0, want);
        buf.erase(0, want);
        return;
    }
    ChunkedDecoder decoder(max);
    out->clear();
    for (;;) {
        size_t used = decoder.feed(buf, out);
        buf.erase(0, used);
        if (decoder.done()) return;
        if (!conn.read_until(deadline, "the whole request body"))
            throw HttpError(400, "bad_request", "the connection closed before the chunked body ended");
    }
}

// Writes the body part of `res` after its head. False when the client went away or a provider gave up.
bool write_body(Connection& conn, Response& res, const Limits& limits, const std::atomic<bool>& stopping) {
    const auto timeout = to_ms(limits.write_timeout_s);
    if (!res.provider && !res.chunked_provider) return conn.write_all(res.body, timeout);
    bool ok = true, done = false;
    size_t written = 0;
    DataSink sink;
    sink.is_writable = [&] { return ok && !stopping.load() && conn.is_writable(); };
    if (res.provider) {
        sink.write = [&](const char* d, size_t n) {
            ok = ok && conn.write_all(std::string_view(d, n), timeout);
            written += n;
            return ok;
        };
        sink.done = [&] { done = true; };
        const uint64_t length = *res.provider_length;
        while (ok && written < length) {
            size_t before = written;
            if (!res.provider(written, static_cast<size_t>(length - written), sink)) return false;
            if (written == before) return false;  // a provider that writes nothing would spin
        }
        return ok && written == length;
    }
    sink.write = [&](const char* d, size_t n) {
        if (n == 0) return ok;
        ok = ok && conn.write_all(fmt::format("{:x}\r\n", n), timeout) &&
             conn.write_all(std::string_view(d, n), timeout) && conn.write_all("\r\n", timeout);
        written += n;
        return ok;
    };
    sink.done = [&] {
        if (!done) ok = ok && conn.write_all("0\r\n\r\n", timeout);
        done = true;
    };
    while (ok && !done)
        if (!res.chunked_provider(written, sink)) return false;
    return ok;
}

}  // namespace

std::string response_head(const Response& res, bool keep_alive) {
    std::string out = fmt::format("HTTP/1.1 {} {}\r\n", res.status, reason_phrase(res.status));
    for (const auto& [name, value] : res.headers.fields()) {
        if (iequals(name, "Content-Length") || iequals(name, "Transfer-Encoding") || iequals(name, "Connection"))
            continue;
        out += name + ": " + value + "\r\n";
    }
    if (res.chunked_provider)
        out += "Transfer-Encoding: chunked\r\n";
    else
        out += fmt::format("Content-Length: {}\r\n", res.provider ? *res.provider_length : res.body.size());
    if (!keep_alive) out += "Connection: close\r\n";
    return out + "\r\n";
}

AfterExchange run_exchange(Connection& conn, RequestHead head, const Limits& limits, const Handler& handler,
                           const ErrorRenderer& render_error, const std::atomic<bool>& stopping,
                           StreamSlots& streams) {
    Request req;
    req.method = head.method;
    req.target = head.target;
    req.path = head.path;
    req.params = head.params;
    req.headers = head.headers;
    bool body_consumed = !head.has_body();
    req.body_reader = [&](std::string* out) {
        read_body(conn, head, limits, out);
        body_consumed = true;
    };
    Response res;
    try {
        handler(req, res);
    } catch (const HttpError& e) {
        res = Response{};
        render_error(e, res);
    } catch (const std::exception& e) {
        res = Response{};
        render_error(HttpError(500, "internal", e.what()), res);
    }
    const bool keep_alive = head.keep_alive && body_consumed && !stopping.load();
    const bool head_only = head.method == "HEAD" || res.status == 204 || res.status == 304;
    bool streams_body = !head_only && (res.provider || res.chunked_provider);
    // A stream holds its worker while the client reads it: past max_streams it is refused, so streams
    // never take every worker.
    SlotHold slot(streams, streams_body);
    if (streams_body && !slot.held()) {
        res = Response{};
        render_error(
            HttpError(503, "overloaded",
                      fmt::format("{} answers are streaming, the most this server streams at once; retry after {} s",
                                  streams.max, limits.retry_after_s)),
            res);
        res.set_header("Retry-After", std::to_string(limits.retry_after_s));
        streams_body = false;
    }
    if (!streams_body) {
        // Head and body in one buffer: what the socket does not take now the event loop sends.
        std::string out = response_head(res, keep_alive);
        if (!head_only) out += res.body;
        conn.queue_write(std::move(out));
        if (conn.flush() == Connection::Flush::kFailed) return AfterExchange::kClose;
    } else {
        const auto timeout = to_ms(limits.write_timeout_s);
        if (!conn.write_all(response_head(res, keep_alive), timeout)) return AfterExchange::kClose;
        if (!write_body(conn, res, limits, stopping)) return AfterExchange::kClose;
    }
    if (keep_alive) return AfterExchange::kKeepAlive;
    return body_consumed ? AfterExchange::kClose : AfterExchange::kDrainAndClose;
}

}  // namespace llmt::server::http
