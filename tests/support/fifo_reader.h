// Reads a FIFO to its end on a thread of its own, with a bounded wait for the result: a writer that
// never comes (or one that replaced the FIFO instead of writing to it) fails the test instead of
// hanging it. Header-only, for tests.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace llmt::testing {

class FifoReader {
public:
    explicit FifoReader(const std::filesystem::path& fifo) : fifo_(fifo) {
        auto done = std::make_shared<std::promise<std::string>>();
        result_ = done->get_future();
        std::thread([done, path = fifo_] {
            std::string got;
            const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // waits for a writer, as a reader does
            if (fd >= 0) {
                char buf[65536];
                for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
                ::close(fd);
            }
            done->set_value(got);
        }).detach();
    }
    // What the reader got, or nullopt when it did not finish within `timeout_s` (it is then left
    // blocked; a writer is opened and closed once to release it when the FIFO is still there).
    std::optional<std::string> result(double timeout_s = 10) {
        if (result_.wait_for(std::chrono::duration<double>(timeout_s)) == std::future_status::ready)
            return result_.get();
        const int fd = ::open(fifo_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) ::close(fd);
        return std::nullopt;
    }

private:
    std::filesystem::path fifo_;
    std::future<std::string> result_;
};

}  // namespace llmt::testing
