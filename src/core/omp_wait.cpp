// GOMP_SPINCOUNT through one re-exec (omp_wait.h).
#include "core/omp_wait.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace llmt {

bool runs_openmp_compute(int argc, char** argv) {
    if (argc < 2) return false;
    for (const char* cmd : {"train", "eval", "generate", "chat"})
        if (std::strcmp(argv[1], cmd) == 0) return true;
    return false;
}

void limit_omp_spinning(int argc, char** argv) {
    if (!runs_openmp_compute(argc, argv)) return;
    if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
    // The binary's own path, not /proc/self/exe: the process name (comm: ps, pgrep, top) is the executed
    // file's base name, and would read "exe".
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0 || n >= static_cast<ssize_t>(sizeof(self) - 1)) return;
    self[n] = '\0';
    if (setenv("GOMP_SPINCOUNT", kOmpSpinCount, 1) != 0) return;
    execv(self, argv);
    unsetenv("GOMP_SPINCOUNT");  // exec failed: libgomp already read its default
}

}  // namespace llmt
