#include "server/jobs/job_env.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/error.h"

namespace llmt::server {

namespace {

// Whole names: the process basics and the locale.
// HOME is not among them: the job's HOME is its own directory (LocalExecutor), so nothing finds the
// operator's ~/.aws, ~/.netrc or ~/.cache/huggingface/token through it.
constexpr const char* kSafeNames[] = {"PATH", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR",
                                      "LD_LIBRARY_PATH",  // where the CUDA/BLAS libraries are
                                      "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES"};

// Prefixes of variables that tune libraries (threads, kernels, collectives) and our own knobs
// (core/knobs.h); none of these libraries reads a credential from such a name.
constexpr const char* kSafePrefixes[] = {"LC_",  "OMP_",  "KMP_",  "GOMP_",    "OPENBLAS_", "MKL_",
                                         "ONEDNN_", "DNNL_", "NCCL_", "GLOO_", "LLMTRAIN_",
                                         "ASAN_", "UBSAN_", "LSAN_", "TSAN_"};  // sanitizer options (make test-asan)

}  // namespace

bool is_job_safe_env(const std::string& name) {
    for (const char* n : kSafeNames)
        if (name == n) return true;
    for (const char* p : kSafePrefixes)
        if (name.rfind(p, 0) == 0) return true;
    return false;
}

std::vector<std::string> job_environment(char** environ, const std::vector<std::string>& pass) {
    std::vector<std::string> out;
    for (char** e = environ; e && *e; ++e) {
        const char* eq = std::strchr(*e, '=');
        if (!eq) continue;
        const std::string name(*e, static_cast<size_t>(eq - *e));
        if (is_job_safe_env(name) || std::find(pass.begin(), pass.end(), name) != pass.end()) out.emplace_back(*e);
    }
    return out;
}

void check_env_name(const std::string& name) {
    const bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                    std::all_of(name.begin(), name.end(),
                                [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!ok)
        throw UsageError("--job-env: '" + name + "' is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
}

}  // namespace llmt::server
