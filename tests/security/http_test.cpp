// The HTTP threats of docs/security.md (findings 3, 4 and 7 of its Tests list): each replayed against a real
// `llmtrain serve` on loopback with raw sockets, every probe bounded by a timeout. Memory probes check the
// server's peak RSS (VmHWM) grows less than 64 MB; the slow-client probe checks /healthz and an authenticated
// GET still answer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <thread>

#include "security/raw_http.h"
#include "server/server_fixture.h"

namespace {

using namespace llmt::testing;
// gzip of `n` zero bytes (the finding's bomb: about 1 MB that inflates to 1 GB).
std::string gzip_of_zeros(size_t n) {
    z_stream z{};
    EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
    std::string in(1 << 20, '\0'), out;
    char buf[1 << 16];
    for (size_t done = 0; done < n;) {
        size_t take = std::min(in.size(), n - done);
        done += take;
        z.next_in = reinterpret_cast<Bytef*>(in.data());
        z.avail_in = static_cast<uInt>(take);
        int flush = done == n ? Z_FINISH : Z_NO_FLUSH;
        do {
            z.next_out = reinterpret_cast<Bytef*>(buf);
            z.avail_out = sizeof buf;
            deflate(&z, flush);
            out.append(buf, sizeof buf - z.avail_out);
        } while (z.avail_out == 0);
    }
    deflateEnd(&z);
    return out;
}

class HttpSecurityTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = fs::temp_directory_path() / ("llmt_security_http_" + std::to_string(::getpid()));
        fs::remove_all(root_);
        server_ = std::make_unique<ServeProcess>(
            root_, std::vector<std::string>{"--capacity", "cpus=0,gpus=0", "--head-timeout-s", "2",
                                            "--max-connections", "40"});
    }
    static void TearDownTestSuite() {
        server_.reset();
        fs::remove_all(root_);
    }
    static int port() { return server_->port(); }
    static pid_t pid() { return server_->pid(); }
    static inline fs::path root_;
    static inline std::unique_ptr<ServeProcess> server_;
};

// POST /v1/jobs with the gzip bomb as its body; returns the raw answer.
std::string post_gzip(int port, const std::string& gz, const std::string& token) {
    RawConn c(port);
    std::string head = "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       "Content-Encoding: gzip\r\nContent-Length: " + std::to_string(gz.size()) + "\r\n";
    if (!token.empty()) head += "Authorization: Bearer " + token + "\r\n";
    c.send(head + "\r\n");
    c.send(gz);  // the server may stop reading early: whatever it took is enough
    return c.read_response();
}

TEST_F(HttpSecurityTest, GzipBombIsRefusedWithoutInflating) {
    const std::string gz = gzip_of_zeros(size_t{1} << 30);
    ASSERT_LT(gz.size(), 2u << 20);
    const int64_t before = vm_hwm_kb(pid());
    HealthWatch health(port());
    std::string anon = post_gzip(port(), gz, "");
    EXPECT_EQ(status_of(anon), 401) << anon.substr(0, 300);
    std::string authed = post_gzip(port(), gz, kSubmitterToken);
    EXPECT_EQ(status_of(authed), 415) << authed.substr(0, 300);
    EXPECT_NE(body_of(authed).find("Content-Encoding 'gzip' is not accepted"), std::string::npos) << authed;
    health.finish();
    EXPECT_EQ(health.failures(), 0) << health.probes() << " probes";
    EXPECT_LT(vm_hwm_kb(pid()) - before, kMaxRssGrowthKb);
}

// A chunked POST that would carry `total` bytes in 64 KiB chunks; returns the raw answer.
std::string post_chunked(int port, size_t total, const std::string& token) {
    RawConn c(port);
    std::string head = "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       "Transfer-Encoding: chunked\r\n";
    if (!token.empty()) head += "Authorization: Bearer " + token + "\r\n";
    c.send(head + "\r\n");
    const std::string chunk = "10000\r\n" + std::string(1 << 16, ' ') + "\r\n";
    for (size_t sent = 0; sent < total; sent += 1 << 16)
        if (!c.send(chunk)) break;  // the server refused and stopped draining
    c.send("0\r\n\r\n");
    return c.read_response();
}

TEST_F(HttpSecurityTest, ChunkedBodyPastTheLimitIsRefused) {
    const int64_t before = vm_hwm_kb(pid());
    HealthWatch health(port());
    std::string anon = post_chunked(port(), 16u << 20, "");
    EXPECT_EQ(status_of(anon), 401) << anon.substr(0, 300);
    std::string authed = post_chunked(port(), 16u << 20, kSubmitterToken);
    EXPECT_EQ(status_of(authed), 413) << authed.substr(0, 300);
    EXPECT_NE(body_of(authed).find("payload_too_large"), std::string::npos) << authed;
    health.finish();
    EXPECT_EQ(health.failures(), 0) << health.probes() << " probes";
    EXPECT_LT(vm_hwm_kb(pid()) - before, kMaxRssGrowthKb);
    // A chunked body under the limit is read like any other.
    RawConn ok(port());
    const std::string json = R"({"name": 1})";
    char size[16];
    std::snprintf(size, sizeof size, "%zx", json.size());
    ok.send(
        std::string("POST /v1/estimate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nAuthorization: Bearer ") +
        kSubmitterToken + "\r\n\r\n" + size + "\r\n" + json + "\r\n0\r\n\r\n");
    std::string r = ok.read_response();
    EXPECT_EQ(status_of(r), 400) << r;  // it reached the handler: the field is wrong, not the framing
    EXPECT_NE(body_of(r).find("invalid_field"), std::string::npos) << r;
}

TEST_F(HttpSecurityTest, SlowHeadersHoldNoWorkerAndLockNobodyOut) {
    // 48 connections (more than --max-connections 40) each sending a head one byte a second.
    const std::string head = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    std::vector<std::unique_ptr<RawConn>> slow;
    for (int i = 0; i < 48; ++i) slow.push_back(std::make_unique<RawConn>(port()));
    std::atomic<bool> done{false};
    std::thread dripper([&] {
        for (size_t k = 0; k < head.size() && !done; ++k) {
            for (auto& c : slow) c->send(head.substr(k, 1));
            std::this_thread::sleep_for(std::chrono::seconds(1));
        }
    });
    // Over 4 s (twice the head deadline): every probe answers within its bound.
    int answered = 0, probes = 0;
    for (auto until = Clock::now() + std::chrono::seconds(4); Clock::now() < until;) {
        ++probes;
        auto t0 = Clock::now();
        int h = probe(port(), "/healthz"), j = probe(port(), "/v1/jobs", kViewerToken);
        EXPECT_EQ(h, 200);
        EXPECT_EQ(j, 200);
        EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2 * kProbeTimeoutS);
        answered += h == 200 && j == 200;
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    EXPECT_EQ(answered, probes);
    // Past the 2 s head deadline the slow ones got 408 (or were closed to make room), never a worker.
    int timed_out = 0, closed = 0;
    for (auto& c : slow) {
        bool gone = c->closed_within(kProbeTimeoutS);
        closed += gone;
        timed_out += c->received().rfind("HTTP/1.1 408", 0) == 0;
    }
    done = true;
    dripper.join();
    EXPECT_EQ(closed, 48);
    EXPECT_GT(timed_out, 0);
}

TEST_F(HttpSecurityTest, LowerCaseBearerSchemeIsAccepted) {
    RawConn c(port());
    c.send(std::string("GET /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: bearer ") +
           kViewerToken + "\r\n\r\n");
    std::string r = c.read_response();
    EXPECT_EQ(status_of(r), 200) << r;
}

TEST_F(HttpSecurityTest, PostWithoutLengthIsRefusedAtOnce) {
    RawConn c(port());
    auto t0 = Clock::now();
    c.send(std::string("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") + kSubmitterToken + "\r\n\r\n");
    std::string r = c.read_response();
    EXPECT_EQ(status_of(r), 411) << r;
    EXPECT_NE(body_of(r).find("length_required"), std::string::npos) << r;
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), kProbeTimeoutS);
}

TEST_F(HttpSecurityTest, ContentLengthWithTransferEncodingIsRefused) {
    RawConn c(port());
    c.send(std::string("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n") +
           "Authorization: Bearer " + kSubmitterToken + "\r\n\r\n0\r\n\r\n");
    std::string r = c.read_response();
    EXPECT_EQ(status_of(r), 400) << r;
    EXPECT_NE(body_of(r).find("both Content-Length and Transfer-Encoding"), std::string::npos) << r;
    EXPECT_TRUE(c.closed_within(kProbeTimeoutS));
}

TEST_F(HttpSecurityTest, ExpectContinueIsAnsweredOnlyAfterAuthentication) {
    const std::string body = R"({"name": 1})";
    RawConn anon(port());
    anon.send("POST /v1/estimate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\n\r\n");
    std::string r = anon.read_response();
    EXPECT_EQ(status_of(r), 401) << r;
    EXPECT_EQ(r.find("100 Continue"), std::string::npos) << r;
    RawConn authed(port());
    authed.send("POST /v1/estimate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nAuthorization: Bearer " +
                std::string(kSubmitterToken) + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n");
    // The interim answer comes first; the body follows it.
    auto until = Clock::now() + std::chrono::seconds(static_cast<int>(kProbeTimeoutS));
    while (authed.received().find("\r\n\r\n") == std::string::npos && Clock::now() < until) authed.closed_within(0.1);
    EXPECT_EQ(authed.received().rfind("HTTP/1.1 100 Continue\r\n\r\n", 0), 0u) << authed.received();
    authed.send(body);
    r = authed.read_response();
    EXPECT_EQ(status_of(r), 400) << r;
}

TEST_F(HttpSecurityTest, LongAndOversizedTargetsAreRefusedAndTheServerLives) {
    // Routes match with std::regex, which recurses per character: the longest target the head
    // allows (8 KiB) must still be matched on a worker's stack.
    std::string artifact = "/v1/jobs/1/artifacts/" + std::string(8000, 'a');
    std::string nested = "/";
    while (nested.size() < 8000) nested += "a/";
    nested += "x.js";
    EXPECT_EQ(probe(port(), artifact, kViewerToken), 404);
    EXPECT_EQ(probe(port(), nested), 404);
    EXPECT_EQ(probe(port(), "/" + std::string(9000, 'a')), 414);
    RawConn big(port());
    big.send("GET /healthz HTTP/1.1\r\nX-Big: " + std::string(20000, 'b') + "\r\n\r\n");
    EXPECT_EQ(status_of(big.read_response()), 431);
    EXPECT_EQ(probe(port(), "/healthz"), 200);
}

}  // namespace

namespace {

// An authenticated POST that announces 100 body bytes and sends 4: the worker that takes it waits for
// the rest (until --body-timeout-s). False when the server did not take the bytes.
bool start_slow_body(RawConn& c) {
    return c.send(std::string("POST /v1/estimate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") + kViewerToken +
                  "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"na");
}

// `serve --threads N` is the number of request workers: one authenticated client sending its body
// slowly holds one of them (until --body-timeout-s), so with one worker /healthz waits behind it and
// with two it answers. The bound what "not answered" means is 1.5 s, far above a probe's few ms.
TEST(HttpThreadsTest, ThreadsIsTheNumberOfRequestWorkers) {
    const fs::path root = fs::temp_directory_path() / ("llmt_security_threads_" + std::to_string(::getpid()));
    for (const char* threads : {"1", "2"}) {
        fs::remove_all(root);
        ServeProcess server(root, {"--capacity", "cpus=0,gpus=0", "--threads", threads, "--body-timeout-s", "30"});
        RawConn slow(server.port());
        ASSERT_TRUE(start_slow_body(slow));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the worker is now reading its body
        RawConn health(server.port());
        ASSERT_TRUE(health.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
        const int status = status_of(health.read_response(1.5));
        EXPECT_EQ(status, std::string(threads) == "1" ? 0 : 200) << "--threads " << threads;
    }
    fs::remove_all(root);
}

TEST(HttpThreadsTest, PastTheQueueRequestsGetServiceUnavailableWithRetryAfter) {
    // --threads 1 --max-queued 1: one slow authenticated body holds the only worker, one more request
    // waits in the queue; the ones after it are answered 503 with Retry-After at once, not left hanging
    // or reset.
    const fs::path root = fs::temp_directory_path() / ("llmt_security_overload_" + std::to_string(::getpid()));
    fs::remove_all(root);
    ServeProcess server(root, {"--capacity", "cpus=0,gpus=0", "--threads", "1", "--max-queued", "1",
                               "--body-timeout-s", "30"});
    RawConn slow(server.port());
    ASSERT_TRUE(start_slow_body(slow));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the worker is now reading its body
    RawConn queued(server.port());
    ASSERT_TRUE(queued.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its head is in the queue
    for (int i = 0; i < 3; ++i) {
        RawConn extra(server.port());
        ASSERT_TRUE(extra.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
        const std::string raw = extra.read_response();
        EXPECT_EQ(status_of(raw), 503) << raw;
        EXPECT_NE(raw.find("Retry-After: 1\r\n"), std::string::npos) << raw;
        EXPECT_NE(raw.find("\"overloaded\""), std::string::npos) << raw;
        EXPECT_TRUE(extra.closed_within(kProbeTimeoutS));
    }
    // The queued request is still waiting for the worker, not refused.
    EXPECT_EQ(status_of(queued.read_response(0.5)), 0);
    server.kill9();
    fs::remove_all(root);
}

}  // namespace
