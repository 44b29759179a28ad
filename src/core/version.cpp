#include "core/version.h"

#include "core/build_info.h"
#include "core/git_sha.h"

namespace llmt {

const BuildInfo& build_info() {
    static const BuildInfo info{LLMT_VERSION, LLMT_GIT_SHA, LLMT_BUILD_TYPE, LLMT_CUDA_ENABLED != 0};
    return info;
}

}  // namespace llmt
