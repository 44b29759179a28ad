// TcpStore: a client of torch's TCPStore protocol (either generation), optionally owning the server
// (distributed/tcp_store_server.h). It speaks to our own server, to torch.distributed.TCPStore (1.13 or 2.x)
// and to a torchrun agent's store alike. Keys get torch's client prefix "/", so a torch worker's
// store.get("k") and ours name the same entry. Generation detection, timeouts and the byte layout:
// docs/distributed.md "The torch store protocol".
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/store.h"
#include "distributed/torch_store_wire.h"

namespace llmt::dist {

class TcpStoreServer;

// Thread safety: all methods may be called from several threads (calls are serialised on one
// connection). The server, when this instance owns it, lives until the destructor.
class TcpStore : public Store {
public:
    // is_server: serve on 0.0.0.0:port (port 0 picks a free one) from a background thread; throws
    // DistError when the port cannot be bound (naming it). Then (every instance) connect to
    // host:port, retrying refused connections and unresolvable names until `timeout` (DistTimeout
    // naming the address), and find out which generation the server speaks: torch 2.x's handshake
    // (VALIDATE, then PING) is answered by a 2.x server and makes a 1.13 server drop the connection,
    // after which the client reconnects and speaks 1.13.
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

    // torch's other queries. Each throws DistError naming the query and the generation when the
    // server's generation has no such query (append, multi_get, multi_set and ping are torch 2.x's).
    // compare_set: stores desired when the value equals expected (a missing key counts as equal to
    // an empty expected); returns the value stored afterwards.
    std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired);
    bool delete_key(const std::string& key);  // true when the key existed
    int64_t num_keys();                       // every key on the server, torch's and ours
    void append(const std::string& key, const std::string& value);
    std::vector<std::string> multi_get(const std::vector<std::string>& keys);  // waits for every key
    void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values);
    void ping();

    int port() const { return port_; }  // the bound port when is_server and port 0 was asked
    TorchStoreGeneration generation() const;

private:
    class Connection;
    using Deadline = std::chrono::steady_clock::time_point;
    void connect_locked();
    bool handshake_locked(Deadline deadline);  // false: the server dropped the torch 2.x handshake
    void ensure_connected_locked();
    void wait_locked(const std::vector<std::string>& keys, const std::string& what);
    uint8_t code_locked(StoreQuery q, const std::string& what) const;
    void send_locked(const WireWriter& w, const std::string& what, Deadline deadline);
    void recv_locked(void* dst, size_t n, const std::string& what, Deadline deadline);
    uint8_t recv_u8_locked(const std::string& what, Deadline deadline);
    int64_t recv_i64_locked(const std::string& what, Deadline deadline);
    std::string recv_bytes_locked(const std::string& what, Deadline deadline);
    Deadline deadline() const { return std::chrono::steady_clock::now() + timeout_; }
    [[noreturn]] void fail_locked(const std::string& what, const std::string& why, bool timed_out);

    std::string host_;
    int port_ = 0;
    int world_size_ = 1;
    std::chrono::milliseconds timeout_;
    std::unique_ptr<TcpStoreServer> server_;
    mutable std::mutex mu_;
    std::unique_ptr<Connection> conn_;
    bool detected_ = false;
    TorchStoreGeneration gen_ = TorchStoreGeneration::kTorch2;
};

}  // namespace llmt::dist
