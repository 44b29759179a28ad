// The store server: torch's TCPStore server protocol, both generations on one port (torch <= 1.13
// clients and torch 2.x clients, told apart per connection by their first bytes), so llmtrain
// workers, torch workers and torchrun agents can share one rendezvous. One background thread
// answers every connection with poll(); waits are parked on the server until their keys are set.
// docs/distributed.md "The torch store protocol".
#pragma once

#include <memory>
#include <thread>

namespace llmt::dist {

class TcpStoreServer {
public:
    // Binds 0.0.0.0 (dual-stack [::] where IPv6 exists) on port (0 picks a free one) and starts the
    // serving thread; throws DistError naming the port when it cannot be bound.
    explicit TcpStoreServer(int port);
    ~TcpStoreServer();  // stops the thread and closes every connection
    TcpStoreServer(const TcpStoreServer&) = delete;
    TcpStoreServer& operator=(const TcpStoreServer&) = delete;

    int port() const { return port_; }

private:
    struct State;
    void loop();

    int listen_fd_ = -1;
    int wake_[2] = {-1, -1};
    int port_ = 0;
    std::unique_ptr<State> state_;
    std::thread thread_;
};

}  // namespace llmt::dist
