// One request/response exchange on a worker thread: builds the Request from the head the event loop
// parsed, gives the handler a body reader that applies the limits (411, 413 before and while reading,
// 415 for Content-Encoding, a whole-body deadline, 100-continue), then writes the answer: a fixed body,
// a sized stream or a chunked stream, with write timeouts.
#pragma once

#include <atomic>
#include <functional>

#include "server/http/limits.h"
#include "server/http/request.h"
#include "server/http/response.h"

namespace llmt::server::http {

class Connection;
class HttpError;

using Handler = std::function<void(Request&, Response&)>;
// Fills a response for a refusal in the caller's error shape (the API's {error: {code, message, field}}).
using ErrorRenderer = std::function<void(const HttpError&, Response&)>;

// What the connection does after the exchange.
enum class AfterExchange {
    kKeepAlive,     // back to the event loop for the next request head
    kDrainAndClose, // the body was not read: read and drop it for Limits::linger_s, then close
    kClose,
};

// The answers streaming now, each holding its worker while it writes, and how many may.
struct StreamSlots {
    std::atomic<size_t> used{0};
    size_t max = 1;
};

// After it returns, conn.unsent() bytes of a fixed answer may still wait for the client: the caller
// sends them (without waiting) before the connection's next request.
AfterExchange run_exchange(Connection& conn, RequestHead head, const Limits& limits, const Handler& handler,
                           const ErrorRenderer& render_error, const std::atomic<bool>& stopping, StreamSlots& streams);

// The status line and fields of `res` (Content-Length or Transfer-Encoding chosen from its body kind,
// "Connection: close" unless `keep_alive`), ending with the blank line.
std::string response_head(const Response& res, bool keep_alive);

}  // namespace llmt::server::http
