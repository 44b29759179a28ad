// Our HTTP/1.1 server (docs/architecture.md says why we have our own): one event-loop thread accepts
// connections and reads request heads without blocking, each head under a whole-head deadline, with a
// cap on open connections that closes the oldest still sending a head (clients on loopback share one
// address, so there is no per-address cap to lock them out). Complete heads go to a pool of workers
// that run the handler (which reads the body only when it asks) and write the answer, through a
// bounded queue: with every worker busy and Limits::max_queued heads waiting, the loop answers 503
// with Retry-After at once. An idle keep-alive connection goes back to the loop and holds no worker.
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
