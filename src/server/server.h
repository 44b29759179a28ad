// llmtrain serve: the control-plane process. Owns the job store, the executor, the scheduler thread
// and the HTTP server; docs/server.md describes the API, auth, states and executors.
#pragma once

#include <functional>
#include <memory>

#include "server/context.h"

namespace llmt::server {

// run() blocks serving requests until stop() is called from another thread.
class Server {
public:
    // Creates the data dir (0700) and opens the store (0600) and tokens; throws InputError/IoError.
    explicit Server(ServerOptions opts);
    ~Server();
    // Binds (throws IoError when the address is taken), reconciles jobs left running by a previous
    // server, starts the scheduler and serves. `on_listening(port)` runs once bound.
    void run(const std::function<void(int port)>& on_listening = {});
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace llmt::server
