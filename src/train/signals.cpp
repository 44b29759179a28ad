#include "train/signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace llmt::train {
namespace {

std::atomic<int> g_signal{0};
std::once_flag g_once;

sigset_t stop_set() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    return s;
}

void record(int sig) {
    int expected = 0;
    if (!g_signal.compare_exchange_strong(expected, sig)) _exit(128 + sig);  // second signal: abort now
}

void watch() {
    sigset_t s = stop_set();
    for (;;) {
        int sig = 0;
        if (sigwait(&s, &sig) == 0) record(sig);
    }
}

}  // namespace

void install_stop_handlers() {
    std::call_once(g_once, [] {
        // Threads that libraries started before us do not block the signals (OpenBLAS starts its pool in
        // its constructor; it is dlopen'ed at its first GEMM, normally after this, and then its threads
        // inherit the block); the handler covers them. It only touches an atomic, and those threads are
        // idle in the library, never inside a JIT kernel.
        struct sigaction sa {};
        sa.sa_handler = record;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        sigaction(SIGTERM, &sa, nullptr);
        sigaction(SIGINT, &sa, nullptr);
        sigset_t s = stop_set();
        pthread_sigmask(SIG_BLOCK, &s, nullptr);
        std::thread(watch).detach();
    });
}

int stop_signal() { return g_signal.load(); }
void reset_stop_signal() { g_signal.store(0); }

}  // namespace llmt::train
