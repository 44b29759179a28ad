// Key-value rendezvous store with torch's c10d Store semantics (set/get/add/wait/check with a timeout),
// and the rendezvous that checks every rank's identity through it. docs/distributed.md.
// Implementations: TcpStore (distributed/tcp_store.h, served by rank 0) and FileStore (distributed/file_store.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llmt::dist {

inline constexpr std::chrono::milliseconds kDefaultStoreTimeout = std::chrono::seconds(300);

// Thread safety: one Store object may be used from one thread at a time (callers that share it
// between threads serialise their calls); several processes may use the same store concurrently.
class Store {
public:
    virtual ~Store();
    virtual void set(const std::string& key, const std::string& value) = 0;
    // Waits for the key up to the timeout; throws DistTimeout naming the key and the store.
    virtual std::string get(const std::string& key) = 0;
    // Atomically adds delta to the integer stored at key (a missing key counts as 0); returns the sum.
    virtual int64_t add(const std::string& key, int64_t delta) = 0;
    // Waits until every key exists; throws DistTimeout naming the missing keys and the store.
    virtual void wait(const std::vector<std::string>& keys) = 0;
    // True when every key exists right now (never waits).
    virtual bool check(const std::vector<std::string>& keys) = 0;
    virtual void set_timeout(std::chrono::milliseconds timeout) = 0;
    virtual std::chrono::milliseconds timeout() const = 0;
    // "tcp://host:port" or "file:///path", for error messages.
    virtual std::string describe() const = 0;
};

// TcpStore (distributed/tcp_store.h): is_server starts the server on host:port (port 0 picks a free one) in
// a background thread of this process; every instance, the server's included, is a client that
// connects with retries until `timeout`. world_size is informational (used by error messages).
std::unique_ptr<Store> make_tcp_store(const std::string& host, int port, bool is_server, int world_size,
                                      std::chrono::milliseconds timeout);

// Every rank calls this once after creating the store. It registers "rank r of world_size" and
// waits for ranks 0..world_size-1. Detected and named on every rank (DistError): a rank index
// registered twice ("duplicate rank 1: ...") and world sizes that differ between ranks. A rank that
// never arrives is a DistTimeout after `timeout` naming the missing ranks. Keys live under `prefix`
// so that a second rendezvous on the same store (a restart with a file store) starts clean.
void rendezvous(Store& store, int rank, int world_size, std::chrono::milliseconds timeout,
                const std::string& prefix = "rdzv/");

}  // namespace llmt::dist
