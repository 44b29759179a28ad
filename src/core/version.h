// What this binary is: version, source revision, build type, backends compiled in.
#pragma once

#include <string>

namespace llmt {

struct BuildInfo {
    std::string version;     // semantic version of llmtrain
    std::string git_sha;     // short SHA of the source tree at build time ("-dirty" if modified)
    std::string build_type;  // CMake build type
    bool cuda = false;       // CUDA backend compiled in
};

const BuildInfo& build_info();

}  // namespace llmt
