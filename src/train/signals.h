// Graceful stop on SIGTERM/SIGINT (what Kubernetes, launchers and Ctrl-C send): the first signal sets a
// flag the trainer checks after each optimizer step (finish the step, checkpoint, exit 143/130); a
// second signal exits at once with 128 + signal number.
//
// The signals are blocked in the main thread and every compute thread created after it, and taken by one
// watcher thread with sigwait(), so no handler ever runs on a thread that is inside a kernel: a handler's
// frame can overwrite stack memory below the stack pointer that JIT-compiled GEMM code (oneDNN) uses,
// which corrupted the heap when SIGTERM arrived mid-step (tests/integration/train_test.cpp,
// SigtermCheckpointsAndResumes). Threads that existed before (library pools) get a handler that only
// records the signal.
#pragma once

namespace llmt::train {

// Blocks SIGTERM/SIGINT in the calling thread (threads created later inherit the mask) and starts the
// watcher thread. Call before any compute thread exists (before the first OpenMP region). Idempotent.
// The watcher stays until the process exits.
void install_stop_handlers();
// The first stop signal received (SIGTERM or SIGINT), or 0.
int stop_signal();
// Clears the recorded signal (tests).
void reset_stop_signal();

}  // namespace llmt::train
