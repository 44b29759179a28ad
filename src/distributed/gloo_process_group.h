// GlooProcessGroup: ProcessGroup on Gloo's TCP transport (Debian libgloo-dev), the CPU backend torch
// uses too. Gloo's rendezvous runs through our Store (wrapped in gloo::rendezvous::Store, keys under a
// per-group prefix); every collective carries the group timeout. docs/distributed.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"

namespace gloo {
class Context;
}

namespace llmt::dist {

// Which local network interface Gloo listens on and advertises to its peers (torch's rules):
// GLOO_SOCKET_IFNAME (first of a comma list) names an interface; otherwise the local address that
// routes to MASTER_ADDR; otherwise this host's name; otherwise 127.0.0.1.
struct GlooDevice {
    std::string iface;     // wins when set
    std::string hostname;  // a local address or name to bind
};
GlooDevice gloo_device_from_env();

// Thread safety: one thread at a time (ProcessGroup's rule).
class GlooProcessGroup : public ProcessGroup {
public:
    // Connects the full mesh through the store; throws DistTimeout (a rank did not arrive within
    // timeout) or DistError (naming the device/address when Gloo cannot listen or connect).
    GlooProcessGroup(Store& store, int rank, int size, std::chrono::milliseconds timeout,
                     const GlooDevice& device = gloo_device_from_env());
    ~GlooProcessGroup() override;
    GlooProcessGroup(const GlooProcessGroup&) = delete;
    GlooProcessGroup& operator=(const GlooProcessGroup&) = delete;

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    std::string_view backend() const override { return "gloo"; }

    void allreduce(Tensor t, ReduceOp op) override;
    void reduce_scatter(Tensor out, Tensor in, ReduceOp op) override;
    void allgather(Tensor out, Tensor in) override;
    void broadcast(Tensor t, int root) override;
    void barrier() override;

    std::chrono::milliseconds timeout() const { return timeout_; }
    // The address Gloo listens on ("[127.0.0.1]:41234"), for logs.
    const std::string& address() const { return address_; }

private:
    template <typename T>
    void reduce_scatter_ring(T* acc, size_t n);
    template <typename T>
    void allgather_ring(T* out, size_t n);
    [[noreturn]] void rethrow(const char* op, const std::exception& e);
    std::vector<int> broken_peers();
    uint32_t next_tag() { return tag_++; }

    int rank_, size_;
    std::chrono::milliseconds timeout_;
    std::shared_ptr<gloo::Context> ctx_;
    std::string address_;
    std::vector<std::string> peer_addresses_;  // per rank, as Gloo prints them in errors
    uint32_t tag_ = 0;
};

}  // namespace llmt::dist
