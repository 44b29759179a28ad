// `llmtrain k8s render -o TARGET` through the real binary, one case per kind of target: a character
// device stays a character device (the finding: a rename over /dev/null made it a regular file), a
// FIFO's reader gets the YAML, a link like /dev/stdout delivers it to the process's stdout and stays a
// link, a regular file is replaced, a directory is refused with exit 2 and left alone. The device is
// our own node in a temporary directory, never the machine's /dev/null.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/fifo_reader.h"
#include "support/subprocess.h"

namespace {

namespace fs = std::filesystem;
using llmt::testing::llmtrain_bin;
using llmt::testing::ProcResult;
using llmt::testing::run_process;

const std::string kPreset = std::string(LLMT_SOURCE_DIR) + "/configs/presets/gpt2_tiny_cpu.yaml";

ProcResult render_to(const fs::path& target) {
    return run_process({llmtrain_bin(), "k8s", "render", "--config", kPreset, "--nodes", "1", "--name", "tiny", "-o",
                        target.string()},
                       "", 60);
}

mode_t lmode(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st.st_mode;
}

class OutputTargetTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("llmt_output_target_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    fs::path dir_;
};

TEST_F(OutputTargetTest, ACharacterDeviceStaysACharacterDevice) {
    const fs::path dev = dir_ / "null";
    if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) GTEST_SKIP() << "mknod needs CAP_MKNOD";
    auto r = render_to(dev);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(S_ISCHR(lmode(dev)));
    EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(OutputTargetTest, AFifoReaderGetsTheYaml) {
    const fs::path fifo = dir_ / "pipe";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    llmt::testing::FifoReader reader(fifo);
    auto r = render_to(fifo);
    const auto got = reader.result();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    ASSERT_TRUE(got) << "nothing was written through the FIFO";
    EXPECT_NE(got->find("apiVersion"), std::string::npos) << got->substr(0, 200);
    EXPECT_TRUE(S_ISFIFO(lmode(fifo)));
}

TEST_F(OutputTargetTest, ALinkLikeDevStdoutDeliversToStdoutAndStaysALink) {
    const fs::path out = dir_ / "stdout";
    fs::create_symlink("/proc/self/fd/1", out);  // what /dev/stdout is
    auto r = render_to(out);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("apiVersion"), std::string::npos) << r.out.substr(0, 200);
    EXPECT_TRUE(S_ISLNK(lmode(out)));
}

TEST_F(OutputTargetTest, ARegularFileIsReplacedAndADirectoryRefused) {
    const fs::path file = dir_ / "tiny.yaml";
    std::ofstream(file) << "old";
    auto r = render_to(file);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::ifstream f(file);
    std::stringstream ss;
    ss << f.rdbuf();
    EXPECT_NE(ss.str().find("apiVersion"), std::string::npos);
    const fs::path d = dir_ / "adir";
    fs::create_directories(d);
    r = render_to(d);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::is_directory(d));
}

}  // namespace
