// Two "hosts" as network namespaces (tests/support/netns_hosts.sh), one `llmtrain launch` on each; the
// workers (tcp_ping) prove that every rank reaches rank 0 over TCP by host name. Skipped, with the
// harness's reason, only where the kernel refuses network namespaces.
#include <gtest/gtest.h>

#include "support/netns_hosts.h"

namespace {

using llmt::testing::llmtrain_bin;
using llmt::testing::run_on_hosts;
using llmt::testing::run_process;

#define EXPECT_HAS(hay, needle) \
    EXPECT_NE((hay).find(needle), std::string::npos) << "looked for: " << (needle) << "\nin:\n" << (hay)

TEST(MultiHost, RankOneReachesRankZeroByHostName) {
    auto h = run_on_hosts(llmtrain_bin() +
                          " launch --nnodes 2 --node-rank $NETNS_HOST_INDEX --nproc-per-node 1 --master-addr host-0 "
                          "--master-port 29400 --exec " LLMT_TCP_PING_BIN);
    if (h.skipped) GTEST_SKIP() << h.skip_reason;
    const auto& r = h.proc;
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_HAS(r.out, "[host-0] [rank 0] rank 0 of 2 on host-0, master host-0:29400\n");
    EXPECT_HAS(r.out, "[host-1] [rank 1] rank 1 reached host-0 (10.213.0.2): ack from rank 0 on host-0\n");
    EXPECT_HAS(r.out, "[host-0] [rank 0] rank 0 got: hello from rank 1 on host-1\n");
    EXPECT_HAS(r.out, "[host-1] llmtrain launch: nnodes=2 (--nnodes) node_rank=1 (--node-rank)");
}

TEST(MultiHost, NodeRankFromTheHostNameWithTwoWorkersEach) {
    // No --node-rank: host-0/host-1 give it, as a StatefulSet pod's name does. Ranks 1..3 all reach rank 0.
    auto h = run_on_hosts(
        llmtrain_bin() +
        " launch --nnodes 2 --nproc-per-node 2 --master-addr host-0 --master-port 29401 --exec " LLMT_TCP_PING_BIN);
    if (h.skipped) GTEST_SKIP() << h.skip_reason;
    const auto& r = h.proc;
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_HAS(r.out, "[host-1] llmtrain launch: nnodes=2 (--nnodes) node_rank=1 (hostname 'host-1')");
    EXPECT_HAS(r.out, "[host-0] [rank 1] rank 1 reached host-0 (10.213.0.2)");
    EXPECT_HAS(r.out, "[host-1] [rank 2] rank 2 reached host-0 (10.213.0.2): ack from rank 0 on host-0\n");
    EXPECT_HAS(r.out, "[host-1] [rank 3] rank 3 reached host-0 (10.213.0.2)");
    EXPECT_HAS(r.out, "[host-0] [rank 0] rank 0 got: hello from rank 3 on host-1\n");
}

TEST(MultiHost, HarnessReportsAFailingHostAndCleansUp) {
    auto h = run_on_hosts("echo \"I am $(hostname) at $NETNS_HOST_IP\"; ip -o link show | grep -c . ; "
                          "getent hosts job-1.svc; [ $NETNS_HOST_INDEX = 0 ] || exit 9",
                          2, 30, {"job-%d.svc"});
    if (h.skipped) GTEST_SKIP() << h.skip_reason;
    const auto& r = h.proc;
    EXPECT_EQ(r.exit_code, 9) << r.out << r.err;
    EXPECT_HAS(r.out, "[host-0] I am host-0 at 10.213.0.2\n");
    EXPECT_HAS(r.out, "[host-1] I am host-1 at 10.213.0.3\n");
    EXPECT_HAS(r.out, "[host-1] 2\n");  // lo and eth0: a namespace of its own
    EXPECT_HAS(r.out, "[host-0] 10.213.0.3      host-1 job-1.svc\n");  // the alias, in every host's /etc/hosts
    EXPECT_HAS(r.out, "netns_hosts.sh: host-1 exited with 9");
    // Nothing of this run is left. Other runs may exist at the same time, so look for this run's names:
    // namespaces llmt-<id>-*, bridge lb<id>, veths lv<id>*/lp<id>*, /etc/netns/llmt-<id>-*.
    const std::string marker = "netns_hosts.sh: run id ";
    auto p = r.out.find(marker);
    ASSERT_NE(p, std::string::npos) << r.out;
    const std::string id = r.out.substr(p + marker.size(), 5);
    auto listing = run_process({"bash", "-c", "ip netns list; ls /etc/netns 2>/dev/null; ip -o link show"}, "", 10);
    EXPECT_EQ(listing.out.find("llmt-" + id), std::string::npos) << listing.out;
    EXPECT_EQ(listing.out.find("lb" + id), std::string::npos) << listing.out;
    EXPECT_EQ(listing.out.find("lv" + id), std::string::npos) << listing.out;
    EXPECT_EQ(listing.out.find("lp" + id), std::string::npos) << listing.out;
}

}  // namespace
