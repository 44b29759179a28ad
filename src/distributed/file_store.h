// FileStore: the Store on one file shared by several processes (tests, single-host jobs without a
// network). Every operation takes flock(LOCK_EX) on the file, reads its records and appends; waits
// poll every few milliseconds. Record format: u32 key length, key, u32 value length, value; the last
// record for a key wins.
#pragma once

#include <chrono>
#include <string>

#include "distributed/store.h"

namespace llmt::dist {

// Thread safety: as Store; several processes and several FileStore objects may share the path.
class FileStore : public Store {
public:
    // Creates the file when missing; throws IoError naming the path when it cannot.
    explicit FileStore(std::string path, std::chrono::milliseconds timeout = kDefaultStoreTimeout);

    void set(const std::string& key, const std::string& value) override;
    std::string get(const std::string& key) override;
    int64_t add(const std::string& key, int64_t delta) override;
    void wait(const std::vector<std::string>& keys) override;
    bool check(const std::vector<std::string>& keys) override;
    void set_timeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
    std::chrono::milliseconds timeout() const override { return timeout_; }
    std::string describe() const override { return "file://" + path_; }

private:
    std::string path_;
    std::chrono::milliseconds timeout_;
};

}  // namespace llmt::dist
