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
    if (setenv("GOMP_SPINCOUNT", kOmpSpinCount, 1) != 0) return;
    execv("/proc/self/exe", argv);
    unsetenv("GOMP_SPINCOUNT");  // exec failed (no /proc?): libgomp already read its default
}

}  // namespace llmt
