// Our HTTP/1.1 server (docs/architecture.md says why we have our own): one event-loop thread accepts
// connections and reads request heads without blocking, each head under a whole-head deadline, with a
// cap on open connections that closes the oldest still sending a head, and per-address caps on open
// connections and requests in flight (429; never for the health path, so a prober behind the same
// address as a flood still gets its answer). Complete heads go to a pool of workers that run the
// handler (which reads the body only when it asks) through a bounded queue: with every worker busy
// and Limits::max_queued heads waiting, the loop answers 503 with Retry-After at once. A fixed answer
// is sent as far as the socket takes it at once; the loop sends the rest under a whole-answer
// deadline and reads the connection's next request only after it, so a client that does not read
// holds one answer's bytes and no worker. Streams (downloads, followed logs) hold their worker, at
// most Limits::max_streams at once. An idle keep-alive connection goes back to the loop and holds no worker.
// Thread safety: bind() then run() on one thread; stop() from any thread, any time.
#pragma once

#include <memory>
#include <string>

#include "server/http/exchange.h"
#include "server/http/limits.h"

namespace llmt::server::http {

struct ServerConfig {
    std::string host = "127.0.0.1";
    int port = 0;  // 0: a free port
    int threads = 32;
    Limits limits;
    std::string health_path = "/healthz";  // never refused by the per-address limits
    Handler handler;
    ErrorRenderer render_error;  // default: text/plain with the message
};

class Server {
public:
    explicit Server(ServerConfig config);
    ~Server();
    // Binds and listens; returns the port. Throws IoError when the address is taken or not available.
    int bind();
    // Serves until stop(); returns after the workers finished their exchanges (streams end at stop).
    void run();
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace llmt::server::http
