// Interop with PyTorch's own TCPStore (tests/distributed/torch_store_peer.py): our client against
// torch.distributed.TCPStore as the server, and torch's client against our server, every query of
// the installed torch's generation, a wait that times out, and a server that disappears mid-wait.
// The python is /usr/bin/python3 (Debian's torch 1.13) unless LLMTRAIN_TORCH_PYTHON names another
// (tools/gpu/torchstore_check.sh points it at torch 2.x); without torch the tests skip saying so.
// The 2.x-only queries are exercised when that python's torch is 2.x, and skip visibly otherwise.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "distributed/tcp_store.h"
#include "multiproc.h"

namespace llmt::dist {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string python() {
    const char* p = std::getenv("LLMTRAIN_TORCH_PYTHON");
    return p != nullptr && *p != '\0' ? p : "/usr/bin/python3";
}
// LLMTRAIN_SOURCE_DIR: the checkout on a machine where the test binary was carried (tools/gpu).
std::string source_dir() {
    const char* d = std::getenv("LLMTRAIN_SOURCE_DIR");
    return d != nullptr && *d != '\0' ? d : LLMT_SOURCE_DIR;
}
const std::string kPeer = source_dir() + "/tests/distributed/torch_store_peer.py";

// torch's version ("1.13.0a0", "2.11.0"), or "" when that python has no torch.
std::string torch_version() {
    static const std::string v = [] {
        std::string cmd = python() + " -c 'import torch; print(torch.__version__)' 2>/dev/null";
        FILE* f = ::popen(cmd.c_str(), "r");
        if (f == nullptr) return std::string();
        char buf[128] = {};
        std::string out = std::fgets(buf, sizeof buf, f) != nullptr ? buf : "";
        ::pclose(f);
        while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
        return out;
    }();
    return v;
}
bool torch2() { return !torch_version().empty() && torch_version()[0] >= '2'; }

#define REQUIRE_TORCH()                                                                                 \
    if (torch_version().empty())                                                                         \
    GTEST_SKIP() << python() << " has no torch (install python3-torch, or set LLMTRAIN_TORCH_PYTHON)"

// The python peer as a child process; stdout+stderr come back through a pipe.
class Peer {
public:
    explicit Peer(const std::vector<std::string>& args) {
        int p[2];
        if (::pipe(p) != 0) throw std::runtime_error("pipe");
        pid_ = ::fork();
        if (pid_ == 0) {
            ::dup2(p[1], 1);
            ::dup2(p[1], 2);
            ::close(p[0]);
            ::close(p[1]);
            std::vector<std::string> all{python(), kPeer};
            all.insert(all.end(), args.begin(), args.end());
            std::vector<char*> argv;
            for (auto& a : all) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        ::close(p[1]);
        out_ = ::fdopen(p[0], "r");
    }
    ~Peer() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (out_ != nullptr) ::fclose(out_);
    }
    Peer(const Peer&) = delete;
    Peer& operator=(const Peer&) = delete;

    // The next output line (without the newline); "" at the end of the output.
    std::string line() {
        char buf[4096];
        if (std::fgets(buf, sizeof buf, out_) == nullptr) return "";
        std::string s = buf;
        if (!s.empty() && s.back() == '\n') s.pop_back();
        output_ += s + "\n";
        return s;
    }
    // Reads the rest of the output and the exit status (bounded by the ctest TIMEOUT).
    int finish() {
        while (!line().empty() || !std::feof(out_)) {
        }
        int status = 0;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    const std::string& output() const { return output_; }

private:
    pid_t pid_ = -1;
    FILE* out_ = nullptr;
    std::string output_;
};

// "PORT 41234 TORCH 1.13.0a0" -> 41234
int port_of(const std::string& first_line) {
    if (first_line.rfind("PORT ", 0) != 0) return -1;
    return std::stoi(first_line.substr(5));
}

TorchStoreGeneration expected_generation() {
    return torch2() ? TorchStoreGeneration::kTorch2 : TorchStoreGeneration::kTorch1;
}

// ---------------------------------------------------------------- our client, torch's server

TEST(TorchStoreInterop, OurClientAgainstTorchServerEveryQuery) {
    REQUIRE_TORCH();
    Peer peer({"server"});
    const int port = port_of(peer.line());
    ASSERT_GT(port, 0) << peer.output();
    TcpStore s("127.0.0.1", port, false, 1, 20s);
    EXPECT_EQ(s.generation(), expected_generation()) << "torch " << torch_version();

    s.set("llmt/set", std::string("value\0from llmtrain", 19));
    EXPECT_EQ(s.get("llmt/set"), std::string("value\0from llmtrain", 19));
    EXPECT_EQ(s.add("llmt/n", 40), 40);
    EXPECT_EQ(s.add("llmt/n", 2), 42);
    EXPECT_TRUE(s.check({"llmt/set", "llmt/n"}));
    EXPECT_FALSE(s.check({"llmt/set", "llmt/never"}));
    s.wait({"llmt/set", "llmt/n"});
    EXPECT_EQ(s.compare_set("llmt/cas", "", "first"), "first");
    EXPECT_EQ(s.compare_set("llmt/cas", "wrong", "x"), "first");
    EXPECT_EQ(s.compare_set("llmt/cas", "first", "second"), "second");
    EXPECT_EQ(s.compare_set("llmt/absent", "exp", "x"), "exp");  // torch answers `expected` here
    const int64_t n0 = s.num_keys();
    s.set("llmt/deleted", "1");
    EXPECT_EQ(s.num_keys(), n0 + 1);
    EXPECT_TRUE(s.delete_key("llmt/deleted"));
    EXPECT_FALSE(s.delete_key("llmt/deleted"));
    EXPECT_EQ(s.num_keys(), n0);
    if (torch2()) {
        s.ping();
        s.append("llmt/app", "a");
        s.append("llmt/app", "bc");
        s.multi_set({"llmt/m1", "llmt/m2"}, {"one", "two"});
        EXPECT_EQ(s.multi_get({"llmt/m1", "llmt/m2"}), (std::vector<std::string>{"one", "two"}));
    } else {
        try {
            s.append("llmt/app", "a");
            ADD_FAILURE() << "append against a torch 1.13 server did not throw";
        } catch (const DistError& e) {
            EXPECT_NE(std::string(e.what()).find("has no append query"), std::string::npos) << e.what();
        }
    }
    s.set("llmt/done", "1");
    try {
        EXPECT_EQ(s.get("py/ack"), "seen");  // torch's client read our keys (checks in the peer)
        s.set("llmt/bye", "1");
    } catch (const DistError& e) {
        peer.finish();
        FAIL() << e.what() << "\npeer output:\n" << peer.output();
    }
    EXPECT_EQ(peer.finish(), 0) << peer.output();
    EXPECT_NE(peer.output().find("OK"), std::string::npos) << peer.output();
}

TEST(TorchStoreInterop, OurWaitAgainstTorchServerTimesOutAndTheStoreStaysUsable) {
    REQUIRE_TORCH();
    Peer peer({"server"});
    const int port = port_of(peer.line());
    ASSERT_GT(port, 0) << peer.output();
    TcpStore s("127.0.0.1", port, false, 1, 20s);
    s.set_timeout(300ms);
    const auto t0 = Clock::now();
    try {
        s.wait({"llmt/never"});
        ADD_FAILURE() << "wait returned";
    } catch (const DistTimeout& e) {
        EXPECT_NE(std::string(e.what()).find("'llmt/never'"), std::string::npos) << e.what();
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_GE(secs, 0.25);
    EXPECT_LT(secs, 10.0);  // 2.x: the cancel is answered at once; 1.13: the connection is dropped
    s.set_timeout(20s);
    s.set("llmt/after", "x");  // 2.x: same connection (CANCEL_WAIT); 1.13: a fresh one
    EXPECT_EQ(s.get("llmt/after"), "x");
}

TEST(TorchStoreInterop, TorchServerThatDisappearsMidWaitIsAnErrorNotAHang) {
    REQUIRE_TORCH();
    Peer peer({"server-dies"});
    const int port = port_of(peer.line());
    ASSERT_GT(port, 0) << peer.output();
    TcpStore s("127.0.0.1", port, false, 1, 60s);
    s.set("llmt/waiting", "1");
    const auto t0 = Clock::now();
    try {
        s.wait({"llmt/never"});
        ADD_FAILURE() << "wait returned";
    } catch (const DistTimeout& e) {
        ADD_FAILURE() << "a lost server must not read as a timeout: " << e.what();
    } catch (const DistError& e) {
        EXPECT_NE(std::string(e.what()).find("closed the connection"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 30.0);
}

// ---------------------------------------------------------------- torch's client, our server

TEST(TorchStoreInterop, TorchClientAgainstOurServerEveryQuery) {
    REQUIRE_TORCH();
    testing::StoreHost host(1, 30s);
    auto ours = host.client(1, 30s);
    ours->set("llmt/preset", "from llmtrain");
    Peer peer({"client", std::to_string(host.port())});
    EXPECT_EQ(peer.finish(), 0) << peer.output();
    EXPECT_NE(peer.output().find("OK"), std::string::npos) << peer.output();
    // What torch's client wrote, read through ours: same keys on the wire.
    EXPECT_EQ(ours->get("py/set"), std::string("v\0" "1", 3));
    EXPECT_EQ(ours->add("py/n", 0), 3);
    EXPECT_EQ(ours->get("py/cas"), "b");
    EXPECT_FALSE(ours->check({"py/extra"}));
    if (torch2()) {
        EXPECT_EQ(ours->get("py/app"), "abc");
        EXPECT_EQ(ours->get("py/m2"), "2");
    }
}

TEST(TorchStoreInterop, TorchClientSeesOurServerDisappearMidWait) {
    REQUIRE_TORCH();
    auto host = std::make_unique<testing::StoreHost>(1, 30s);
    auto ours = host->client(1, 30s);
    Peer peer({"client-waits", std::to_string(host->port())});
    ours->wait({"py/waiting"});
    std::this_thread::sleep_for(300ms);  // the peer's wait is parked on the server
    ours.reset();
    host.reset();  // kills the serving process
    EXPECT_EQ(peer.finish(), 0) << peer.output();
    auto at = peer.output().find("RAISED after ");
    ASSERT_NE(at, std::string::npos) << peer.output();
    EXPECT_LT(std::stod(peer.output().substr(at + 13)), 30.0) << peer.output();
}

TEST(TorchStoreInterop, OurTorchTwoQueriesAgainstTorchTwoServer) {
    REQUIRE_TORCH();
    if (!torch2()) {
        GTEST_SKIP() << "torch " << torch_version()
                     << " here: ping/append/multi_get/multi_set and CANCEL_WAIT are torch 2.x queries; "
                        "tools/gpu/torchstore_check.sh runs this suite against torch 2.x";
    }
    Peer peer({"serve-only"});
    const int port = port_of(peer.line());
    ASSERT_GT(port, 0) << peer.output();
    TcpStore s("127.0.0.1", port, false, 1, 20s);
    s.ping();
    s.multi_set({"a", "b"}, {"1", std::string("\0\1", 2)});
    EXPECT_EQ(s.multi_get({"b", "a"}), (std::vector<std::string>{std::string("\0\1", 2), "1"}));
    s.append("a", "23");
    EXPECT_EQ(s.get("a"), "123");
    s.set_timeout(200ms);
    EXPECT_THROW(s.multi_get({"a", "never"}), DistTimeout);  // waits first, like torch's multi_get
    s.set_timeout(20s);
    s.ping();  // the cancelled wait left the connection in step
    s.set("llmt/bye", "1");
    EXPECT_EQ(peer.finish(), 0) << peer.output();
}

}  // namespace
}  // namespace llmt::dist
