// GOMP_SPINCOUNT through one re-exec (omp_wait.h).
#include "core/omp_wait.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace llmt {

const char* omp_spin_count_for(int argc, char** argv) {
    if (argc < 2) return nullptr;
    // print-config and version --gemm-probe may run the CPU precision probe (train/cpu_precision.h), which must
    // time the GEMMs as training runs them: longer spins read as CPU time and tilt it against bf16's extra forks.
    for (const char* cmd : {"train", "eval", "print-config"})
        if (std::strcmp(argv[1], cmd) == 0) return kOmpSpinCount;
    if (std::strcmp(argv[1], "version") == 0)
        for (int i = 2; i < argc; ++i)
            if (std::strcmp(argv[i], "--gemm-probe") == 0) return kOmpSpinCount;
    for (const char* cmd : {"generate", "chat"})
        if (std::strcmp(argv[1], cmd) == 0) return kDecodeOmpSpinCount;
    return nullptr;
}

void limit_omp_spinning(int argc, char** argv) {
    const char* spin = omp_spin_count_for(argc, argv);
    if (!spin) return;
    if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
    // The binary's own path, not /proc/self/exe: the process name (comm: ps, pgrep, top) is the executed
    // file's base name, and would read "exe".
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0 || n >= static_cast<ssize_t>(sizeof(self) - 1)) return;
    self[n] = '\0';
    if (setenv("GOMP_SPINCOUNT", spin, 1) != 0) return;
    execv(self, argv);
    unsetenv("GOMP_SPINCOUNT");  // exec failed: libgomp already read its default
}

}  // namespace llmt
