// Store and rendezvous across real processes: TcpStore on 127.0.0.1 (server + clients forked) and
// FileStore (several processes, one file). Expected values are fixed in advance.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "distributed/file_store.h"
#include "distributed/store.h"
#include "distributed/tcp_store.h"
#include "multiproc.h"

namespace llmt::dist {
namespace {

using namespace std::chrono_literals;
using testing::ChildFn;
using testing::describe;
using testing::free_port;
using testing::run_children;
using testing::StoreHost;
using Report = std::function<void(const std::string&)>;

TEST(TcpStore, SetGetAddWaitCheckAcrossProcesses) {
    const int port = free_port();
    std::vector<ChildFn> fns;
    fns.push_back([&](const Report& report) {
        TcpStore s("127.0.0.1", port, /*is_server=*/true, 3, 10s);
        s.set("from0", "zero");
        EXPECT_TRUE(s.check({"from0"}));
        s.wait({"from1", "from2"});
        report(s.get("from1") + "," + s.get("from2"));
        s.add("counter", 5);
        s.wait({"done1", "done2"});  // the server lives until the clients are finished
    });
    for (int r = 1; r <= 2; ++r) {
        fns.push_back([&, r](const Report& report) {
            TcpStore s("127.0.0.1", port, false, 3, 10s);
            report(s.get("from0"));  // waits for rank 0's set
            s.set("from" + std::to_string(r), std::string(static_cast<size_t>(r), 'x'));
            EXPECT_FALSE(s.check({"never-set"}));
            s.add("counter", r * 100);
            s.wait({"from1", "from2"});
            s.set("done" + std::to_string(r), "");
        });
    }
    auto rs = run_children(fns, 30);
    ASSERT_TRUE(rs[0].ok && rs[1].ok && rs[2].ok) << describe(rs);
    EXPECT_EQ(rs[0].message, "x,xx");
    EXPECT_EQ(rs[1].message, "zero");
    EXPECT_EQ(rs[2].message, "zero");
}

TEST(TcpStore, AddIsAtomicAndReturnsTheSum) {
    StoreHost host(1, 10s);
    const int port = host.port();
    std::vector<ChildFn> fns;
    for (int c = 0; c < 4; ++c) {
        fns.push_back([&](const Report&) {
            TcpStore s("127.0.0.1", port, false, 5, 10s);
            for (int i = 0; i < 200; ++i) s.add("n", 1);
        });
    }
    auto rs = run_children(fns, 60);
    for (const auto& r : rs) ASSERT_TRUE(r.ok) << describe(rs);
    auto store = host.client(5, 10s);
    EXPECT_EQ(store->add("n", 0), 800);
    EXPECT_EQ(store->add("n", -800), 0);
    EXPECT_EQ(store->add("fresh", 7), 7);
}

TEST(TcpStore, PortZeroPicksAFreePort) {
    TcpStore a("127.0.0.1", 0, true, 1, 5s);
    TcpStore b("127.0.0.1", 0, true, 1, 5s);
    EXPECT_GT(a.port(), 0);
    EXPECT_GT(b.port(), 0);
    EXPECT_NE(a.port(), b.port());
    a.set("k", "a");
    b.set("k", "b");
    EXPECT_EQ(a.get("k"), "a");
    EXPECT_EQ(b.get("k"), "b");
    EXPECT_NE(a.describe().find(std::to_string(a.port())), std::string::npos);
}

TEST(TcpStore, PortInUseIsNamed) {
    TcpStore a("127.0.0.1", 0, true, 1, 5s);
    try {
        TcpStore b("127.0.0.1", a.port(), true, 1, 5s);
        FAIL() << "second server on the same port";
    } catch (const DistError& e) {
        EXPECT_NE(std::string(e.what()).find(std::to_string(a.port())), std::string::npos) << e.what();
    }
}

TEST(TcpStore, GetTimeoutNamesKeyAndStore) {
    TcpStore s("127.0.0.1", 0, true, 1, 5s);
    s.set_timeout(300ms);
    auto t0 = std::chrono::steady_clock::now();
    try {
        s.get("missing/key");
        FAIL() << "get of a missing key returned";
    } catch (const DistTimeout& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("missing/key"), std::string::npos) << m;
        EXPECT_NE(m.find("tcp://127.0.0.1:" + std::to_string(s.port())), std::string::npos) << m;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The timeout is 0.3 s; a loaded 2-core machine may add scheduling delay, but not seconds.
    EXPECT_GE(secs, 0.29);
    EXPECT_LT(secs, 3.0);
    try {
        s.wait({"a", "b"});
        FAIL() << "wait for missing keys returned";
    } catch (const DistTimeout& e) {
        EXPECT_NE(std::string(e.what()).find("'a', 'b'"), std::string::npos) << e.what();
    }
    // The store stays usable after a timeout (the client reconnects).
    s.set("a", "1");
    EXPECT_EQ(s.get("a"), "1");
}

TEST(TcpStore, ClientsStartedBeforeTheServerConnect) {
    const int port = free_port();
    std::vector<ChildFn> fns;
    for (int r = 1; r <= 2; ++r) {
        fns.push_back([&, r](const Report& report) {
            TcpStore s("127.0.0.1", port, false, 3, 20s);  // retries until the server is up
            rendezvous(s, r, 3, 20s);
            report(s.get("hello"));
        });
    }
    fns.push_back([&](const Report&) {
        std::this_thread::sleep_for(1500ms);
        TcpStore s("127.0.0.1", port, true, 3, 20s);
        s.set("hello", "from the server");
        rendezvous(s, 0, 3, 20s);
        s.wait({"rdzv/rank/1/1", "rdzv/rank/2/1"});
        std::this_thread::sleep_for(500ms);  // let the clients read "hello" before the server goes
    });
    auto rs = run_children(fns, 60);
    for (const auto& r : rs) ASSERT_TRUE(r.ok) << describe(rs);
    EXPECT_EQ(rs[0].message, "from the server");
    EXPECT_EQ(rs[1].message, "from the server");
}

TEST(TcpStore, NoServerIsATimeoutNamingTheAddress) {
    const int port = free_port();
    auto t0 = std::chrono::steady_clock::now();
    try {
        TcpStore s("127.0.0.1", port, false, 2, 1s);
        FAIL() << "connected to nothing";
    } catch (const DistTimeout& e) {
        EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos) << e.what();
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(secs, 4.0);  // 1 s timeout plus at most one backoff step and scheduling slack
}

// The rendezvous tests serve the store from a StoreHost (a process of its own, forked before the
// ranks), so that it outlives every rank and the errors the ranks publish are read whatever order
// they exit in.

TEST(Rendezvous, LateRankStillJoins) {
    StoreHost host(3, 30s);
    const int port = host.port();
    std::vector<ChildFn> fns;
    for (int r = 0; r < 3; ++r) {
        fns.push_back([&, r](const Report&) {
            if (r == 2) std::this_thread::sleep_for(4s);  // started seconds after the others
            TcpStore s("127.0.0.1", port, false, 3, 30s);
            rendezvous(s, r, 3, 30s);
        });
    }
    auto rs = run_children(fns, 60);
    for (const auto& r : rs) ASSERT_TRUE(r.ok) << describe(rs);
    EXPECT_FALSE(host.client(3, 30s)->check({"rdzv/error"}));
}

TEST(Rendezvous, DuplicateRankIsNamedOnEveryRank) {
    StoreHost host(3, 30s);
    const int port = host.port();
    std::vector<ChildFn> fns;
    for (int r : {0, 1, 1}) {
        fns.push_back([&, r](const Report&) {
            TcpStore s("127.0.0.1", port, false, 3, 20s);
            rendezvous(s, r, 3, 20s);
        });
    }
    auto rs = run_children(fns, 60);
    for (const auto& r : rs) {
        EXPECT_EQ(r.error_type, "DistError") << describe(rs);
        EXPECT_NE(r.message.find("duplicate rank 1"), std::string::npos) << describe(rs);
        EXPECT_NE(r.message.find("pid"), std::string::npos) << describe(rs);  // names both processes
    }
}

TEST(Rendezvous, WorldSizeMismatchIsNamedOnEveryRank) {
    StoreHost host(2, 30s);
    const int port = host.port();
    std::vector<ChildFn> fns;
    for (int r = 0; r < 2; ++r) {
        fns.push_back([&, r](const Report&) {
            TcpStore s("127.0.0.1", port, false, 2, 20s);
            rendezvous(s, r, r == 0 ? 2 : 3, 20s);
        });
    }
    auto rs = run_children(fns, 60);
    for (const auto& r : rs) {
        EXPECT_EQ(r.error_type, "DistError") << describe(rs);
        EXPECT_NE(r.message.find("world size mismatch"), std::string::npos) << describe(rs);
        EXPECT_NE(r.message.find("WORLD_SIZE=2"), std::string::npos) << describe(rs);
        EXPECT_NE(r.message.find("WORLD_SIZE=3"), std::string::npos) << describe(rs);
    }
}

TEST(Rendezvous, MissingRankIsATimeoutNamingIt) {
    StoreHost host(3, 30s);
    const int port = host.port();
    std::vector<ChildFn> fns;
    for (int r = 0; r < 2; ++r) {
        fns.push_back([&, r](const Report&) {
            TcpStore s("127.0.0.1", port, false, 3, 20s);
            rendezvous(s, r, 3, 1s);
        });
    }
    auto rs = run_children(fns, 60);
    for (const auto& r : rs) {
        EXPECT_EQ(r.error_type, "DistTimeout") << describe(rs);
        EXPECT_NE(r.message.find("rank 2 of 3 did not arrive"), std::string::npos) << describe(rs);
    }
}

class FileStoreTest : public ::testing::Test {
protected:
    void SetUp() override {
        path_ = (std::filesystem::temp_directory_path() /
                 ("llmt_filestore_" + std::to_string(getpid()) + "_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                    .string();
        std::filesystem::remove(path_);
    }
    void TearDown() override { std::filesystem::remove(path_); }
    std::string path_;
};

TEST_F(FileStoreTest, SetGetAddWaitAcrossProcesses) {
    std::vector<ChildFn> fns;
    for (int r = 0; r < 3; ++r) {
        fns.push_back([&, r](const Report& report) {
            FileStore s(path_, 20s);
            rendezvous(s, r, 3, 20s);
            s.set("v" + std::to_string(r), std::string(static_cast<size_t>(r + 1), 'a' + static_cast<char>(r)));
            for (int i = 0; i < 50; ++i) s.add("n", 1);
            s.wait({"v0", "v1", "v2"});
            report(s.get("v0") + s.get("v1") + s.get("v2"));
        });
    }
    auto rs = run_children(fns, 60);
    for (const auto& r : rs) {
        ASSERT_TRUE(r.ok) << describe(rs);
        EXPECT_EQ(r.message, "abbccc");
    }
    FileStore s(path_);
    EXPECT_EQ(s.add("n", 0), 150);
    EXPECT_TRUE(s.check({"v0", "v1"}));
    EXPECT_FALSE(s.check({"v0", "v9"}));
}

TEST_F(FileStoreTest, TimeoutNamesTheMissingKey) {
    FileStore s(path_, 200ms);
    s.set("present", "1");
    try {
        s.wait({"present", "absent"});
        FAIL() << "wait returned";
    } catch (const DistTimeout& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("'absent'"), std::string::npos) << m;
        EXPECT_EQ(m.find("'present'"), std::string::npos) << m;
        EXPECT_NE(m.find(path_), std::string::npos) << m;
    }
    EXPECT_THROW(s.get("absent"), DistTimeout);
    s.set("text", "abc");
    EXPECT_THROW(s.add("text", 1), DistError);
}

TEST_F(FileStoreTest, DuplicateRankIsNamed) {
    std::vector<ChildFn> fns;
    for (int r : {0, 0}) {
        fns.push_back([&, r](const Report&) {
            FileStore s(path_, 20s);
            rendezvous(s, r, 2, 20s);
        });
    }
    auto rs = run_children(fns, 60);
    for (const auto& r : rs) EXPECT_NE(r.message.find("duplicate rank 0"), std::string::npos) << describe(rs);
}

}  // namespace
}  // namespace llmt::dist
