// GlooProcessGroup (see gloo_process_group.h). All-reduce, all-gather, broadcast and barrier are Gloo's
// timeout-aware algorithms; reduce-scatter is a ring over Gloo's unbound buffers (Gloo's own
// ReduceScatterHalvingDoubling predates per-operation timeouts).
#include "distributed/gloo_process_group.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "distributed/store.h"

namespace llmt::dist {
namespace {

// Gloo's rendezvous store interface over ours; every key gets the group's prefix.
class GlooStoreAdapter : public gloo::rendezvous::Store {
public:
    GlooStoreAdapter(dist::Store& store, std::string prefix) : store_(store), prefix_(std::move(prefix)) {}
    void set(const std::string& key, const std::vector<char>& data) override {
        store_.set(prefix_ + key, std::string(data.begin(), data.end()));
    }
    std::vector<char> get(const std::string& key) override {
        std::string v = store_.get(prefix_ + key);
        return {v.begin(), v.end()};
    }
    void wait(const std::vector<std::string>& keys) override {
        std::vector<std::string> p;
        for (const auto& k : keys) p.push_back(prefix_ + k);
        store_.wait(p);
    }
    // Gloo passes its context timeout, which is ours: the store's own timeout bounds the wait.
    void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override { wait(keys); }

private:
    dist::Store& store_;
    std::string prefix_;
};

// The local address that routes to `host` (connect() on a UDP socket sends nothing, it only picks the
// route), so Gloo advertises an address its peers can reach. Empty when `host` does not resolve.
std::string local_address_towards(const std::string& host) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0) return {};
    std::string out;
    for (addrinfo* ai = res; ai != nullptr && out.empty(); ai = ai->ai_next) {
        int fd = ::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            sockaddr_storage ss{};
            socklen_t len = sizeof ss;
            char buf[INET6_ADDRSTRLEN] = {};
            if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
                const void* a = ss.ss_family == AF_INET6
                                    ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr)
                                    : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr);
                if (::inet_ntop(ss.ss_family, a, buf, sizeof buf)) out = buf;
            }
        }
        ::close(fd);
    }
    ::freeaddrinfo(res);
    return out;
}

std::atomic<int> g_group_seq{0};

// Gloo's timeouts say "Timed out waiting ...", and after one every pair of the context fails with
// "Application timeout caused pair closure"; a dead peer is "Connection closed/reset by peer".
bool is_timeout(const std::exception& e) {
    std::string m = e.what();
    for (char& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return m.find("timed out") != std::string::npos || m.find("timeout") != std::string::npos;
}

template <typename T>
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// moves: a collective that only moves bytes (all-gather, broadcast), which also takes bf16.
void check_cpu(const Tensor& t, const char* op, const char* name, bool moves = false) {
    LLMT_INTERNAL_CHECK(t.device == Device::kCpu, "{}: {} must be a CPU tensor for the gloo backend, got {}", op, name,
               t.describe());
    LLMT_INTERNAL_CHECK(t.dtype == DType::kF32 || t.dtype == DType::kI32 || (moves && t.dtype == DType::kBF16),
                        "{}: {} must be f32 or i32{}, got {}", op, name, moves ? " or bf16" : "", t.describe());
    LLMT_INTERNAL_CHECK(t.data != nullptr || t.numel() == 0, "{}: {} has no data", op, name);
}

}  // namespace

GlooDevice gloo_device_from_env() {
    GlooDevice d;
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
        std::string s = ifname;
        d.iface = s.substr(0, s.find(','));
        return d;
    }
    if (const char* master = std::getenv("MASTER_ADDR"); master && *master) {
        d.hostname = local_address_towards(master);
        if (!d.hostname.empty()) return d;
    }
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0 && !local_address_towards(host).empty()) {
        d.hostname = host;
        return d;
    }
    d.hostname = "127.0.0.1";
    return d;
}

GlooProcessGroup::GlooProcessGroup(Store& store, int rank, int size, std::chrono::milliseconds timeout,
                                   const GlooDevice& device)
    : rank_(rank), size_(size), timeout_(timeout) {
    LLMT_INTERNAL_CHECK(size >= 1 && rank >= 0 && rank < size, "process group: rank {} outside 0..{}", rank, size - 1);
    // A write to the socket of a peer that just died must be an error of the collective, not a
    // SIGPIPE that kills this survivor (Python, hence torch, ignores SIGPIPE for the same reason).
    struct sigaction old_action {};
    if (::sigaction(SIGPIPE, nullptr, &old_action) == 0 && old_action.sa_handler == SIG_DFL) {
        ::signal(SIGPIPE, SIG_IGN);
    }
    gloo::transport::tcp::attr attr;
    if (!device.iface.empty()) {
        attr.iface = device.iface;
    } else {
        attr.hostname = device.hostname.empty() ? "127.0.0.1" : device.hostname;
    }
    const std::string where =
        device.iface.empty() ? "address '" + attr.hostname + "'" : "interface '" + attr.iface + "'";
    std::shared_ptr<gloo::transport::Device> dev;
    try {
        dev = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
        throw DistError(fmt::format("gloo: cannot listen on {} (rank {}): {}\nhint: set GLOO_SOCKET_IFNAME to "
                                    "the interface that reaches the other hosts",
                                    where, rank, e.what()));
    }
    // Keys of this group: restarted jobs (TORCHELASTIC_RESTART_COUNT) and later groups of the same
    // process never read an earlier group's addresses from a store that outlived it.
    const char* restarts = std::getenv("TORCHELASTIC_RESTART_COUNT");
    std::string prefix = fmt::format("gloo/r{}/g{}/", restarts ? restarts : "0", g_group_seq.fetch_add(1));
    GlooStoreAdapter adapter(store, prefix);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(timeout);
    auto saved_timeout = store.timeout();
    store.set_timeout(timeout);
    try {
        ctx->connectFullMesh(adapter, dev);
    } catch (const DistError&) {
        store.set_timeout(saved_timeout);
        throw;
    } catch (const std::exception& e) {
        store.set_timeout(saved_timeout);
        std::string msg = fmt::format("gloo: connecting rank {} of {} on {} failed: {}", rank, size, where, e.what());
        if (is_timeout(e)) throw DistTimeout(msg);
        throw DistError(msg);
    }
    store.set_timeout(saved_timeout);
    ctx_ = ctx;

    // Every rank's listening address as Gloo prints it in its errors ("[ip]:port"): rank i stored
    // one address per peer under key "<i>" (Gloo's full-mesh rendezvous), all on one listener.
    peer_addresses_.resize(static_cast<size_t>(size));
    if (size > 1) {
        for (int i = 0; i < size; ++i) {
            std::string blob = store.get(prefix + std::to_string(i));
            size_t one = blob.size() / static_cast<size_t>(size - 1);
            std::string s = gloo::transport::tcp::Address(std::vector<char>(blob.begin(), blob.begin() + one)).str();
            peer_addresses_[static_cast<size_t>(i)] = s.substr(0, s.find('$'));
        }
        address_ = peer_addresses_[static_cast<size_t>(rank)];
    }
}

GlooProcessGroup::~GlooProcessGroup() = default;

// Ranks whose connection is broken. A peer that died closed its sockets, and Gloo's event loop marks
// the pair to it as failed as soon as the kernel reports it; a send on such a pair throws that
// failure at once, while on a healthy pair it only queues a notification (the group is being
// abandoned, so the unmatched notification does no harm).
std::vector<int> GlooProcessGroup::broken_peers() {
    std::vector<int> dead;
    static char probe = 0;
    const uint64_t slot = static_cast<uint64_t>(ctx_->nextSlot());
    for (int i = 0; i < size_; ++i) {
        if (i == rank_) continue;
        try {
            auto buf = ctx_->createUnboundBuffer(&probe, 1);
            buf->send(i, slot);
        } catch (const std::exception& e) {
            // After a timeout Gloo fails every pair of the context with the timeout message; a pair
            // keeps the first failure it saw, so "closed/reset by peer" still marks the dead one.
            if (!is_timeout(e)) dead.push_back(i);
        }
    }
    return dead;
}

void GlooProcessGroup::rethrow(const char* op, const std::exception& e) {
    std::string what = e.what();
    // Gloo names the peer by address: its listening address (which we know per rank) when this rank
    // connected to it, an ephemeral port when it connected to us; then ask the pairs.
    std::vector<int> lost;
    for (int i = 0; i < size_; ++i) {
        const auto& a = peer_addresses_[static_cast<size_t>(i)];
        if (i != rank_ && !a.empty() && what.find(a) != std::string::npos) lost.push_back(i);
    }
    // A survivor that gave up closes its sockets too, so the address in the message may be a
    // survivor's; the probe adds the peers whose connection is broken by now.
    for (int i : broken_peers()) {
        if (std::find(lost.begin(), lost.end(), i) == lost.end()) lost.push_back(i);
    }
    std::sort(lost.begin(), lost.end());
    std::string ranks;
    for (int r : lost) ranks += (ranks.empty() ? "rank " : ", rank ") + std::to_string(r);
    // A timeout stays a timeout (a stuck peer, or a dead one this rank was not talking to); the
    // ranks whose connection broke meanwhile are named either way.
    if (is_timeout(e)) {
        throw DistTimeout(fmt::format("{} timed out on rank {} of {} after {:.1f} s ({}): {}", op, rank_, size_,
                                      timeout_.count() / 1000.0,
                                      lost.empty() ? "a peer is stuck, dead or calls another collective"
                                                   : "lost connection to " + ranks +
                                                         ": dead, or gave up after an error of its own",
                                      what));
    }
    if (!lost.empty()) {
        throw DistError(fmt::format("{} failed on rank {} of {}: lost connection to {} (dead, or gave up after an "
                                    "error of its own): {}",
                                    op, rank_, size_, ranks, what));
    }
    throw DistError(fmt::format("{} failed on rank {} of {}: {}", op, rank_, size_, what));
}

void GlooProcessGroup::allreduce(Tensor t, ReduceOp op) {
    check_cpu(t, "allreduce", "tensor");
    LLMT_INTERNAL_CHECK(op == ReduceOp::kSum || t.dtype == DType::kF32, "allreduce: average needs f32, got {}",
               t.describe());
    const size_t n = static_cast<size_t>(t.numel());
    if (n == 0) return;
    if (size_ > 1) {
        try {
            gloo::AllreduceOptions opts(ctx_);
            opts.setTag(next_tag());
            opts.setTimeout(timeout_);
            if (t.dtype == DType::kF32) {
                opts.setOutput(static_cast<float*>(t.data), n);
                opts.setReduceFunction(static_cast<ReduceFn<float>>(&gloo::sum<float>));
            } else {
                opts.setOutput(static_cast<int32_t*>(t.data), n);
                opts.setReduceFunction(static_cast<ReduceFn<int32_t>>(&gloo::sum<int32_t>));
            }
            gloo::allreduce(opts);
        } catch (const gloo::Exception& e) {
            rethrow("allreduce", e);
        }
    }
    if (op == ReduceOp::kAvg && size_ > 1) {
        float* p = static_cast<float*>(t.data);
        const float world = static_cast<float>(size_);
        for (size_t i = 0; i < n; ++i) p[i] /= world;
    }
}

// Ring reduce-scatter over acc (size * n elements, overwritten): in step s rank r sends its partial sum
// of chunk (r-s-1) to r+1 and adds the partial sum of chunk (r-s-2) received from r-1; after size-1 steps
// chunk r of acc is complete. Chunks travel in segments of at most kRingSegment elements, so the receive
// buffer stays small whatever n is (an in-place reduce-scatter of a whole gradient arena allocates no
// second arena).
constexpr size_t kRingSegment = size_t{1} << 20;

template <typename T>
void GlooProcessGroup::reduce_scatter_ring(T* acc, size_t n) {
    const int P = size_;
    const size_t seg = std::min(n, kRingSegment);
    const size_t segments = (n + seg - 1) / seg;
    std::vector<T> recv(seg);
    auto send_buf = ctx_->createUnboundBuffer(acc, n * static_cast<size_t>(P) * sizeof(T));
    auto recv_buf = ctx_->createUnboundBuffer(recv.data(), seg * sizeof(T));
    const int next = (rank_ + 1) % P, prev = (rank_ + P - 1) % P;
    const uint64_t slot = static_cast<uint64_t>(ctx_->nextSlot(static_cast<int>(segments) * (P - 1)));
    for (size_t g = 0; g < segments; ++g) {
        const size_t off = g * seg, len = std::min(seg, n - off);
        for (int s = 0; s < P - 1; ++s) {
            const uint64_t tag = slot + g * static_cast<uint64_t>(P - 1) + static_cast<uint64_t>(s);
            const size_t send_chunk = static_cast<size_t>((rank_ - s - 1 + 2 * P) % P);
            const size_t recv_chunk = static_cast<size_t>((rank_ - s - 2 + 2 * P) % P);
            send_buf->send(next, tag, (send_chunk * n + off) * sizeof(T), len * sizeof(T));
            recv_buf->recv(prev, tag, 0, len * sizeof(T));
            recv_buf->waitRecv(timeout_);
            T* dst = acc + recv_chunk * n + off;
            for (size_t i = 0; i < len; ++i) dst[i] += recv[i];
            send_buf->waitSend(timeout_);
        }
    }
}

// Ring all-gather in place: out (size * n elements) holds this rank's chunk at chunk `rank`; in step s
// rank r sends chunk (r-s) to r+1 and receives chunk (r-s-1) from r-1 straight into out.
template <typename T>
void GlooProcessGroup::allgather_ring(T* out, size_t n) {
    const int P = size_;
    auto buf = ctx_->createUnboundBuffer(out, n * static_cast<size_t>(P) * sizeof(T));
    const int next = (rank_ + 1) % P, prev = (rank_ + P - 1) % P;
    const uint64_t slot = static_cast<uint64_t>(ctx_->nextSlot(P - 1));
    for (int s = 0; s < P - 1; ++s) {
        const size_t send_chunk = static_cast<size_t>((rank_ - s + P) % P);
        const size_t recv_chunk = static_cast<size_t>((rank_ - s - 1 + 2 * P) % P);
        buf->send(next, slot + static_cast<uint64_t>(s), send_chunk * n * sizeof(T), n * sizeof(T));
        buf->recv(prev, slot + static_cast<uint64_t>(s), recv_chunk * n * sizeof(T), n * sizeof(T));
        buf->waitRecv(timeout_);
        buf->waitSend(timeout_);
    }
}

void GlooProcessGroup::reduce_scatter(Tensor out, Tensor in, ReduceOp op) {
    check_cpu(out, "reduce_scatter", "out");
    check_cpu(in, "reduce_scatter", "in");
    LLMT_INTERNAL_CHECK(out.dtype == in.dtype, "reduce_scatter: out {} and in {} differ in dtype", out.describe(),
               in.describe());
    LLMT_INTERNAL_CHECK(in.numel() == out.numel() * size_,
                        "reduce_scatter: in has {} elements, expected size {} x out {}", in.numel(), size_,
                        out.numel());
    LLMT_INTERNAL_CHECK(op == ReduceOp::kSum || out.dtype == DType::kF32, "reduce_scatter: average needs f32, got {}",
               out.describe());
    const size_t n = static_cast<size_t>(out.numel());
    if (n == 0) return;
    const bool in_place = out.data == static_cast<char*>(in.data) + static_cast<size_t>(rank_) * out.nbytes();
    if (size_ > 1) {
        try {
            // Out of place the ring works on a copy of in (which stays as it was); in place on in itself.
            std::vector<char> copy;
            char* acc = static_cast<char*>(in.data);
            if (!in_place) {
                copy.assign(acc, acc + in.nbytes());
                acc = copy.data();
            }
            if (out.dtype == DType::kF32) {
                reduce_scatter_ring(reinterpret_cast<float*>(acc), n);
            } else {
                reduce_scatter_ring(reinterpret_cast<int32_t*>(acc), n);
            }
            if (!in_place) std::memcpy(out.data, acc + static_cast<size_t>(rank_) * out.nbytes(), out.nbytes());
        } catch (const gloo::Exception& e) {
            rethrow("reduce_scatter", e);
        }
    } else if (!in_place) {
        std::memmove(out.data, in.data, out.nbytes());
    }
    if (op == ReduceOp::kAvg && size_ > 1) {
        float* p = static_cast<float*>(out.data);
        const float world = static_cast<float>(size_);
        for (size_t i = 0; i < n; ++i) p[i] /= world;
    }
}

void GlooProcessGroup::allgather(Tensor out, Tensor in) {
    check_cpu(out, "allgather", "out", true);
    check_cpu(in, "allgather", "in", true);
    LLMT_INTERNAL_CHECK(out.dtype == in.dtype, "allgather: out {} and in {} differ in dtype", out.describe(),
                        in.describe());
    LLMT_INTERNAL_CHECK(out.numel() == in.numel() * size_, "allgather: out has {} elements, expected size {} x in {}",
               out.numel(), size_, in.numel());
    const size_t n = static_cast<size_t>(in.numel());
    if (n == 0) return;
    char* mine = static_cast<char*>(out.data) + static_cast<size_t>(rank_) * in.nbytes();
    if (mine != in.data) std::memmove(mine, in.data, in.nbytes());
    if (size_ == 1) return;
    try {
        if (in.dtype == DType::kBF16) {
            allgather_ring(static_cast<uint16_t*>(out.data), n);
        } else {
            allgather_ring(static_cast<uint32_t*>(out.data), n);  // f32 and i32 alike: bytes moved, not read
        }
    } catch (const gloo::Exception& e) {
        rethrow("allgather", e);
    }
}

void GlooProcessGroup::broadcast(Tensor t, int root) {
    check_cpu(t, "broadcast", "tensor", true);
    LLMT_INTERNAL_CHECK(root >= 0 && root < size_, "broadcast: root {} outside 0..{}", root, size_ - 1);
    const size_t n = static_cast<size_t>(t.numel());
    if (n == 0 || size_ == 1) return;
    try {
        gloo::BroadcastOptions opts(ctx_);
        opts.setTag(next_tag());
        opts.setTimeout(timeout_);
        opts.setRoot(root);
        if (t.dtype == DType::kBF16) {
            opts.setOutput(static_cast<uint16_t*>(t.data), n);
        } else {
            opts.setOutput(static_cast<uint32_t*>(t.data), n);  // f32 and i32 alike: bytes moved, not read
        }
        gloo::broadcast(opts);
    } catch (const gloo::Exception& e) {
        rethrow("broadcast", e);
    }
}

void GlooProcessGroup::barrier() {
    if (size_ == 1) return;
    try {
        gloo::BarrierOptions opts(ctx_);
        opts.setTag(next_tag());
        opts.setTimeout(timeout_);
        gloo::barrier(opts);
    } catch (const gloo::Exception& e) {
        rethrow("barrier", e);
    }
}

}  // namespace llmt::dist
