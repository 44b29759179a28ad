// Special files where a regular file is expected: a FIFO with no writer, a directory and a
// character device are refused at once, naming the path and its type, by open_regular_file and by the
// shared readers built on it (read_file, SafetensorsFile::open).
#include "core/regular_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/fs.h"
#include "core/safetensors.h"

using namespace llmt;
namespace fs = std::filesystem;

namespace {

class RegularFileTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("llmt_regular_file_" + std::to_string(::getpid()));
        fs::create_directories(dir_);
        fifo_ = dir_ / "fifo";
        ASSERT_EQ(::mkfifo(fifo_.c_str(), 0600), 0);
    }
    void TearDown() override { fs::remove_all(dir_); }

    // The InputError message of f(), which must come back within a second (a blocking open would hang).
    template <typename F>
    std::string refused(F&& f) {
        const auto t0 = std::chrono::steady_clock::now();
        std::string msg;
        try {
            f();
        } catch (const InputError& e) {
            msg = e.what();
        }
        EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
        return msg;
    }

    fs::path dir_, fifo_;
};

}  // namespace

TEST_F(RegularFileTest, FifoIsRefusedWithoutBlocking) {
    std::string msg = refused([&] { open_regular_file(fifo_, "config file"); });
    EXPECT_NE(msg.find("'" + fifo_.string() + "' is a FIFO (named pipe), expected a regular file (config file)"),
              std::string::npos)
        << msg;
    msg = refused([&] { read_file(fifo_); });
    EXPECT_NE(msg.find("is a FIFO"), std::string::npos) << msg;
    msg = refused([&] { SafetensorsFile::open(fifo_); });
    EXPECT_NE(msg.find("is a FIFO (named pipe), expected a regular file (safetensors file)"), std::string::npos)
        << msg;
}

TEST_F(RegularFileTest, DirectoryAndDeviceAreRefused) {
    EXPECT_NE(refused([&] { read_file(dir_); }).find("is a directory, expected a regular file"), std::string::npos);
    EXPECT_NE(refused([&] { open_regular_file("/dev/null", "shard"); }).find("is a character device"),
              std::string::npos);
}

TEST_F(RegularFileTest, RegularFileOpensBlocking) {
    write_file_atomic(dir_ / "f.txt", "hello");
    RegularFile f = open_regular_file(dir_ / "f.txt", "");
    EXPECT_EQ(f.size, 5u);
    char buf[8];
    EXPECT_EQ(::read(f.fd.get(), buf, sizeof buf), 5);
    EXPECT_EQ(read_file(dir_ / "f.txt"), "hello");
    EXPECT_THROW(open_regular_file(dir_ / "missing", "config file"), IoError);
}
