// The S3 client and transfers against a real S3-compatible server (s3rver.h): every call, a file above
// the multipart threshold, an upload whose server is stopped mid-way and restarted (the retries finish
// it), a store that stays down (the error names the URI and gives up), and a 404 that is not retried.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "storage/md5.h"
#include "storage/s3_client.h"
#include "storage/transfer.h"
#include "storage/s3rver.h"

namespace llmt::storage {
namespace {

namespace fs = std::filesystem;

std::string pattern(size_t n, unsigned seed) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed + i / 977) & 0xff);
    return s;
}

std::string read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

fs::path write_temp(const std::string& name, const std::string& bytes) {
    const fs::path p = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
}

TEST(S3Client, EveryCall) {
    testing::S3rver server;
    S3Client c(server.settings());
    const S3Uri base{server.bucket(), "runs/r1/"};
    const std::string body = pattern(1000, 1);
    EXPECT_EQ(c.put_object(base.join("a b+c.bin"), body), md5_hex(body));
    c.put_object(base.join("z.txt"), "zz");
    const auto info = c.head_object(base.join("a b+c.bin"));
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->size, 1000u);
    EXPECT_FALSE(c.head_object(base.join("missing")).has_value());
    EXPECT_EQ(c.get_object(base.join("a b+c.bin")), body);
    EXPECT_EQ(c.get_object(base.join("a b+c.bin"), std::make_pair(uint64_t{10}, uint64_t{20})), body.substr(10, 20));
    const auto listed = c.list_objects(base);
    ASSERT_EQ(listed.size(), 2u);
    EXPECT_EQ(listed[0].key, "runs/r1/a b+c.bin");
    EXPECT_EQ(listed[0].size, 1000u);
    EXPECT_EQ(listed[1].key, "runs/r1/z.txt");
    c.delete_object(base.join("z.txt"));
    EXPECT_EQ(c.list_objects(base).size(), 1u);
}

TEST(S3Client, MissingKeyIsNotRetried) {
    testing::S3rver server;
    S3Client c(server.settings());
    const auto t0 = std::chrono::steady_clock::now();
    try {
        c.get_object({server.bucket(), "nope"});
        FAIL() << "expected StorageError";
    } catch (const StorageError& e) {
        EXPECT_EQ(e.status(), 404);
        EXPECT_EQ(e.code(), "NoSuchKey");
        EXPECT_NE(std::string(e.what()).find("s3://llmt-test/nope"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));  // no backoff waits
}

TEST(Transfer, MultipartAboveThreshold) {
    testing::S3rver server;
    S3Client c(server.settings());
    const std::string bytes = pattern(300 * 1024 + 17, 2);
    const fs::path src = write_temp("llmt_mp_src", bytes), dst = src.string() + ".back";
    TransferOptions o;
    o.part_bytes = 64 * 1024;
    int parts_seen = 0;
    o.on_part = [&](int, int parts) {
        ++parts_seen;
        EXPECT_EQ(parts, 5);
    };
    EXPECT_EQ(upload_file(c, src, {server.bucket(), "big/model.safetensors"}, o), 5);
    EXPECT_EQ(parts_seen, 5);
    const auto info = c.head_object({server.bucket(), "big/model.safetensors"});
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->size, bytes.size());
    // (s3rver answers HEAD with the MD5 of the whole object, not AWS's multipart "<md5 of md5s>-<parts>".)
    download_file(c, {server.bucket(), "big/model.safetensors"}, dst, 100 * 1024);
    EXPECT_EQ(read_all(dst), bytes);
    fs::remove(src);
    fs::remove(dst);
}

TEST(Transfer, ServerStoppedMidUploadThenRetriedToCompletion) {
    testing::S3rver server;
    S3Settings s = server.settings();
    s.max_attempts = 40;  // 0.05 s doubling to 0.5 s: ~18 s of retries, the outage is ~1.5 s
    S3Client c(s);
    const std::string bytes = pattern(256 * 1024, 3);
    const fs::path src = write_temp("llmt_outage_src", bytes), dst = src.string() + ".back";
    TransferOptions o;
    o.part_bytes = 32 * 1024;
    std::thread restarter;
    o.on_part = [&](int part, int) {
        if (part != 3) return;
        server.stop();  // parts 4.. and the completion meet a closed port until the restart
        restarter = std::thread([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(1500));
            server.start();
        });
    };
    EXPECT_EQ(upload_file(c, src, {server.bucket(), "outage/optimizer.safetensors"}, o), 8);
    restarter.join();
    download_file(c, {server.bucket(), "outage/optimizer.safetensors"}, dst);
    EXPECT_EQ(read_all(dst), bytes);
    fs::remove(src);
    fs::remove(dst);
}

TEST(Transfer, StoreThatStaysDownGivesUpNamingTheUri) {
    testing::S3rver server;
    S3Settings s = server.settings();
    s.max_attempts = 3;
    server.stop();
    S3Client c(s);
    try {
        c.put_object({server.bucket(), "x/y"}, "data");
        FAIL() << "expected StorageError";
    } catch (const StorageError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("PUT s3://llmt-test/x/y"), std::string::npos) << m;
        EXPECT_NE(m.find("gave up after 3 attempts"), std::string::npos) << m;
        EXPECT_EQ(m.find("S3RVER"), std::string::npos) << "credentials in a message: " << m;
    }
}

// A request hanging on a frozen store (SIGSTOP) ends at once when another thread cancels the client.
TEST(S3Client, CancelStopsARequestInFlight) {
    testing::S3rver server;
    S3Client c(server.settings());
    server.pause();
    std::string what;
    std::thread t([&] {
        try {
            c.put_object({server.bucket(), "hang"}, std::string(1 << 20, 'x'));
        } catch (const std::exception& e) {
            what = e.what();
        }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto t0 = std::chrono::steady_clock::now();
    c.cancel();
    t.join();
    server.resume();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
    EXPECT_NE(what.find("cancelled"), std::string::npos) << what;
}

}  // namespace
}  // namespace llmt::storage
