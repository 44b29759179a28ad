// TcpStore: the rendezvous store served by rank 0 over TCP (torch's TCPStore semantics, not its wire
// protocol). One background thread of the server process answers every client with poll(); waiting
// requests (get/wait on a missing key) are parked on the server and answered when the key is set.
// Wire format and timeout behaviour: docs/distributed.md "Store and process group".
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dist/store.h"

namespace llmt::dist {

class TcpStoreServer;

// Thread safety: all methods may be called from several threads (calls are serialised on one
// connection). The server, when this instance owns it, lives until the destructor.
class TcpStore : public Store {
public:
    // is_server: bind 0.0.0.0:port (port 0 picks a free one) and serve from a background thread; throws
    // DistError when the port cannot be bound (naming it). Then (every instance) connect to
    // host:port, retrying refused connections and unresolvable names until `timeout`; throws
    // DistTimeout naming the address when it never succeeds.
    TcpStore(const std::string& host, int port, bool is_server, int world_size,
             std::chrono::milliseconds timeout);
    ~TcpStore() override;
    TcpStore(const TcpStore&) = delete;
    TcpStore& operator=(const TcpStore&) = delete;

    void set(const std::string& key, const std::string& value) override;
    std::string get(const std::string& key) override;
    int64_t add(const std::string& key, int64_t delta) override;
    void wait(const std::vector<std::string>& keys) override;
    bool check(const std::vector<std::string>& keys) override;
    void set_timeout(std::chrono::milliseconds timeout) override;
    std::chrono::milliseconds timeout() const override;
    std::string describe() const override;

    int port() const { return port_; }  // the bound port when is_server and port 0 was asked

private:
    std::string request(uint8_t op, const std::vector<std::string>& args, const std::string& what);
    void connect_locked();
    void disconnect_locked();

    std::string host_;
    int port_ = 0;
    int world_size_ = 1;
    std::chrono::milliseconds timeout_;
    std::unique_ptr<TcpStoreServer> server_;
    mutable std::mutex mu_;
    int fd_ = -1;
};

}  // namespace llmt::dist
