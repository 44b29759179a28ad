// The torch store wire format at the byte level: the query codes of both generations (torch 1.13's
// TCPStore.cpp and 2.x's TCPStoreBackend.hpp enums, written out here), and our server's per-connection
// generation detection fed raw bytes, including the cases torch's own clients never send first.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "core/error.h"
#include "distributed/tcp_store.h"
#include "distributed/tcp_store_server.h"
#include "distributed/torch_store_wire.h"

namespace llmt::dist {
namespace {

using G = TorchStoreGeneration;
using Q = StoreQuery;

TEST(TorchStoreWire, TorchOneCodesStartAtSet) {
    EXPECT_EQ(query_code(G::kTorch1, Q::kSet), 0);
    EXPECT_EQ(query_code(G::kTorch1, Q::kCompareSet), 1);
    EXPECT_EQ(query_code(G::kTorch1, Q::kGet), 2);
    EXPECT_EQ(query_code(G::kTorch1, Q::kAdd), 3);
    EXPECT_EQ(query_code(G::kTorch1, Q::kCheck), 4);
    EXPECT_EQ(query_code(G::kTorch1, Q::kWait), 5);
    EXPECT_EQ(query_code(G::kTorch1, Q::kNumKeys), 6);
    EXPECT_EQ(query_code(G::kTorch1, Q::kWatchKey), 7);
    EXPECT_EQ(query_code(G::kTorch1, Q::kDeleteKey), 8);
    EXPECT_FALSE(query_code(G::kTorch1, Q::kValidate));
    EXPECT_FALSE(query_code(G::kTorch1, Q::kAppend));
    EXPECT_FALSE(query_code(G::kTorch1, Q::kPing));
    EXPECT_FALSE(query_of(G::kTorch1, 9));
}

TEST(TorchStoreWire, TorchTwoCodesStartAtValidate) {
    const Q order[] = {Q::kValidate, Q::kSet,      Q::kCompareSet, Q::kGet,        Q::kAdd,       Q::kCheck,
                       Q::kWait,     Q::kNumKeys,  Q::kDeleteKey,  Q::kAppend,     Q::kMultiGet,  Q::kMultiSet,
                       Q::kCancelWait, Q::kPing,   Q::kQueuePush,  Q::kQueuePop,   Q::kQueueLen};
    for (size_t i = 0; i < std::size(order); ++i) {
        EXPECT_EQ(query_code(G::kTorch2, order[i]), i) << to_string(order[i]);
        EXPECT_EQ(query_of(G::kTorch2, static_cast<uint8_t>(i)), order[i]);
    }
    EXPECT_FALSE(query_code(G::kTorch2, Q::kWatchKey));
    EXPECT_EQ(kTorchValidationMagic, 0x3C85F7CEu);
}

TEST(TorchStoreWire, ReaderWaitsForPartialFieldsAndRefusesAbsurdLengths) {
    std::string buf = WireWriter().bytes("key").data();
    std::string part = buf.substr(0, 9);
    std::string s;
    WireReader partial(part);
    EXPECT_FALSE(partial.bytes(s));
    WireReader whole(buf);
    EXPECT_TRUE(whole.bytes(s));
    EXPECT_EQ(s, "key");
    std::string absurd = WireWriter().u64(kMaxStoreString + 1).data();
    WireReader r(absurd);
    EXPECT_THROW(r.bytes(s), WireError);
}

// A raw connection to our server.
class Raw {
public:
    explicit Raw(int port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(static_cast<uint16_t>(port));
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("connect");
    }
    ~Raw() { ::close(fd_); }
    void send(const std::string& s) { ASSERT_EQ(::send(fd_, s.data(), s.size(), 0), static_cast<ssize_t>(s.size())); }
    // n bytes, or fewer when the server closed the connection (5 s bound).
    std::string recv(size_t n) {
        std::string out;
        while (out.size() < n) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 5000) != 1) break;
            char buf[256];
            ssize_t r = ::recv(fd_, buf, std::min(sizeof buf, n - out.size()), 0);
            if (r <= 0) break;
            out.append(buf, static_cast<size_t>(r));
        }
        return out;
    }

private:
    int fd_;
};

std::string i64_bytes(int64_t v) { return WireWriter().i64(v).data(); }

TEST(TorchStoreWire, ServerTakesAFirstByteZeroWithoutTheMagicAsTorchOneSet) {
    TcpStoreServer server(0);
    Raw c(server.port());
    c.send(WireWriter().u8(0).bytes("/k").bytes("v1").data());  // 1.13 SET: no reply
    c.send(WireWriter().u8(2).bytes("/k").data());                // 1.13 GET
    EXPECT_EQ(c.recv(10), WireWriter().bytes("v1").data());
    c.send(WireWriter().u8(6).data());  // 1.13 GETNUMKEYS
    EXPECT_EQ(c.recv(8), i64_bytes(1));
}

TEST(TorchStoreWire, ServerSpeaksTorchTwoAfterValidate) {
    TcpStoreServer server(0);
    Raw c(server.port());
    c.send(WireWriter().u8(0).u32(kTorchValidationMagic).u8(13).u32(77).data());  // VALIDATE, PING
    EXPECT_EQ(c.recv(4), WireWriter().u32(77).data());
    c.send(WireWriter().u8(4).bytes("/n").i64(5).data());  // 2.x ADD
    EXPECT_EQ(c.recv(8), i64_bytes(5));
    c.send(WireWriter().u8(6).keys({"/never"}).data());  // 2.x WAIT: parked
    c.send(WireWriter().u8(12).data());                  // CANCEL_WAIT
    EXPECT_EQ(c.recv(1), std::string(1, static_cast<char>(WaitReply::kWaitCanceled)));
}

TEST(TorchStoreWire, ServerClosesOnAWrongMagicOrAnUnknownCode) {
    TcpStoreServer server(0);
    Raw wrong(server.port());
    wrong.send(WireWriter().u8(0).u32(kTorchValidationMagic).u8(0).u32(0xdeadbeef).data());
    EXPECT_EQ(wrong.recv(1), "");
    Raw unknown(server.port());
    unknown.send(WireWriter().u8(9).data());  // 1.13 has no code 9
    EXPECT_EQ(unknown.recv(1), "");
    Raw fine(server.port());  // the server still serves
    fine.send(WireWriter().u8(6).data());
    EXPECT_EQ(fine.recv(8), i64_bytes(0));
}

// Our client on our server speaks torch 2.x; a timed-out wait is cancelled (CANCEL_WAIT, answered
// WAIT_CANCELED) and the same connection answers the next queries in step.
TEST(TorchStoreWire, OurTimedOutWaitIsCancelledAndTheConnectionStaysInStep) {
    using namespace std::chrono_literals;
    TcpStore s("127.0.0.1", 0, /*is_server=*/true, 1, 5s);
    EXPECT_EQ(s.generation(), TorchStoreGeneration::kTorch2);
    s.set_timeout(200ms);
    EXPECT_THROW(s.wait({"never"}), DistTimeout);
    EXPECT_THROW(s.get("never"), DistTimeout);
    s.set_timeout(5s);
    s.set("k", "v");
    EXPECT_EQ(s.get("k"), "v");
    EXPECT_EQ(s.num_keys(), 1);
    EXPECT_EQ(s.multi_get({"k"}), std::vector<std::string>{"v"});
}

}  // namespace
}  // namespace llmt::dist
