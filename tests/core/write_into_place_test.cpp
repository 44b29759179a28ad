// WriteIntoPlace and write_file_atomic, one case per kind of target: nothing there and a regular file
// are replaced whole (no temporary file left); a character device, a FIFO and a symbolic link (as
// /dev/stdout is) are written through and stay what they were; a directory, a block device and a link
// to a directory are refused with InputError (exit 2) and left alone.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/fs.h"
#include "core/write_into_place.h"
#include "support/fifo_reader.h"

namespace {

namespace fs = std::filesystem;

class WriteIntoPlaceTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("llmt_into_place_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    static std::string slurp(const fs::path& p) {
        std::ifstream f(p, std::ios::binary);
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    }
    // How many entries `dir_` has (a temporary file left behind would be one more).
    size_t entries() const {
        return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
    }
    static mode_t lmode(const fs::path& p) {
        struct stat st {};
        EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
        return st.st_mode;
    }
    fs::path dir_;
};

TEST_F(WriteIntoPlaceTest, NothingThereAndARegularFileAreReplacedWhole) {
    const fs::path p = dir_ / "out.yaml";
    llmt::write_file_atomic(p, "first\n");
    EXPECT_EQ(slurp(p), "first\n");
    const auto inode = fs::status(p).type();
    EXPECT_EQ(inode, fs::file_type::regular);
    struct stat before {};
    ::stat(p.c_str(), &before);
    llmt::write_file_atomic(p, "second\n");
    struct stat after {};
    ::stat(p.c_str(), &after);
    EXPECT_EQ(slurp(p), "second\n");
    EXPECT_NE(before.st_ino, after.st_ino);  // renamed over, not rewritten in place
    EXPECT_EQ(entries(), 1u);
    // Without commit() the target is untouched and the temporary file gone.
    {
        llmt::WriteIntoPlace w(p);
        EXPECT_FALSE(w.through());
        w.write("partial", 7);
    }
    EXPECT_EQ(slurp(p), "second\n");
    EXPECT_EQ(entries(), 1u);
}

TEST_F(WriteIntoPlaceTest, ACharacterDeviceIsWrittenThroughAndStaysOne) {
    // A device node of our own (the same as /dev/null: 1,3), so the test never risks the machine's.
    const fs::path dev = dir_ / "null";
    if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) GTEST_SKIP() << "mknod needs CAP_MKNOD";
    llmt::write_file_atomic(dev, "into the void\n");
    EXPECT_TRUE(S_ISCHR(lmode(dev)));
    EXPECT_EQ(entries(), 1u);
}

TEST_F(WriteIntoPlaceTest, AFifoIsWrittenThroughToItsReader) {
    const fs::path fifo = dir_ / "pipe";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    llmt::testing::FifoReader reader(fifo);  // its open lets the writer's open return
    llmt::write_file_atomic(fifo, "through the pipe\n");
    EXPECT_EQ(reader.result().value_or("(nothing came through)"), "through the pipe\n");
    EXPECT_TRUE(S_ISFIFO(lmode(fifo)));
    EXPECT_EQ(entries(), 1u);
}

TEST_F(WriteIntoPlaceTest, ASymbolicLinkLikeDevStdoutIsWrittenThroughAndStaysALink) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    // What /dev/stdout is: a link to /proc/self/fd/N.
    const fs::path out = dir_ / "stdout";
    fs::create_symlink("/proc/self/fd/" + std::to_string(fds[1]), out);
    llmt::write_file_atomic(out, "to the pipe\n");
    ::close(fds[1]);
    char buf[64] = {};
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    ::close(fds[0]);
    EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "to the pipe\n");
    EXPECT_TRUE(S_ISLNK(lmode(out)));
    // A link to a regular file: the file gets the bytes, the link stays.
    const fs::path file = dir_ / "real.txt", link = dir_ / "link.txt";
    llmt::write_file_atomic(file, "old");
    fs::create_symlink(file, link);
    llmt::write_file_atomic(link, "new");
    EXPECT_EQ(slurp(file), "new");
    EXPECT_TRUE(S_ISLNK(lmode(link)));
    // A dangling link is created through, as `>` would.
    const fs::path dangling = dir_ / "dangling";
    fs::create_symlink(dir_ / "made.txt", dangling);
    llmt::write_file_atomic(dangling, "made");
    EXPECT_EQ(slurp(dir_ / "made.txt"), "made");
    EXPECT_TRUE(S_ISLNK(lmode(dangling)));
}

TEST_F(WriteIntoPlaceTest, ADirectoryBlockDeviceOrLinkToADirectoryIsRefused) {
    const fs::path d = dir_ / "adir";
    fs::create_directories(d);
    try {
        llmt::write_file_atomic(d, "x");
        FAIL() << "accepted";
    } catch (const llmt::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(fs::is_directory(d));
    const fs::path link = dir_ / "dirlink";
    fs::create_symlink(d, link);
    EXPECT_THROW(llmt::write_file_atomic(link, "x"), llmt::InputError);
    EXPECT_TRUE(S_ISLNK(lmode(link)));
    const fs::path blk = dir_ / "blk";
    if (::mknod(blk.c_str(), S_IFBLK | 0600, makedev(7, 0)) == 0) {
        try {
            llmt::write_file_atomic(blk, "x");
            FAIL() << "accepted";
        } catch (const llmt::InputError& e) {
            EXPECT_NE(std::string(e.what()).find("a block device"), std::string::npos) << e.what();
        }
        EXPECT_TRUE(S_ISBLK(lmode(blk)));
    }
}

}  // namespace
