// Progress (src/data/shards/prepare_progress.h): the terminal bar and the plain periodic lines.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "data/shards/prepare_progress.h"

namespace llmt::data {
namespace {

std::string run(bool tty) {
    std::FILE* f = std::tmpfile();
    {
        Progress p("job", 4'000'000, tty, f);
        // The bar redraws at most every 0.1 s; the plain mode prints every 5 s, so within this test
        // only its final line appears.
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        p.update(1'000'000);
        p.finish("3 documents");
    }
    std::rewind(f);
    std::string out;
    char buf[512];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
    std::fclose(f);
    return out;
}

TEST(Progress, TerminalBarThenFinalLine) {
    const std::string out = run(true);
    EXPECT_EQ(out.rfind("\rjob: [#######.......................]  25.0% 1.0/4.0 MB ", 0), 0u) << out;
    EXPECT_NE(out.find(" MB/s ETA "), std::string::npos) << out;
    EXPECT_NE(out.find("\r\x1b[Kjob: done, 4.0 MB in "), std::string::npos) << out;
    EXPECT_NE(out.find(", 3 documents\n"), std::string::npos) << out;
}

TEST(Progress, PlainModeHasNoControlCharacters) {
    const std::string out = run(false);
    EXPECT_EQ(out.find('\r'), std::string::npos) << out;
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
    EXPECT_EQ(out.rfind("job: done, 4.0 MB in ", 0), 0u) << out;
}

}  // namespace
}  // namespace llmt::data
