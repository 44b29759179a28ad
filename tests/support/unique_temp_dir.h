// Test support: a new directory under the system temp dir, named by mkdtemp from a prefix (so concurrent
// processes never share it), removed with everything in it when the object goes away.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace llmt::testing {

class UniqueTempDir {
public:
    explicit UniqueTempDir(const std::string& prefix) {
        std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
        if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
        path_ = tmpl;
    }
    ~UniqueTempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    UniqueTempDir(const UniqueTempDir&) = delete;
    UniqueTempDir& operator=(const UniqueTempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

}  // namespace llmt::testing
