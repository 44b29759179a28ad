// Worker-level distributed environment: exactly torchrun's variables (docs/design.md §4, docs/distributed.md).
// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT,
// TORCHELASTIC_USE_AGENT_STORE.
#pragma once

#include <cstdlib>
#include <functional>
#include <string>

namespace llmt::dist {

struct WorkerEnv {
    int rank = 0, local_rank = 0, world_size = 1, local_world_size = 1;
    std::string master_addr;
    int master_port = 0;
    int restart_count = 0;
    // TORCHELASTIC_USE_AGENT_STORE=True: a torchrun agent serves the store at MASTER_ADDR:MASTER_PORT
    // (every rank is a client); otherwise rank 0 serves it there.
    bool use_agent_store = false;
    bool distributed() const { return world_size > 1; }
};

// Reads the worker environment through getenv_fn (the real environment by default; tests pass a map).
// Unset variables take the single-process defaults above. Throws UsageError naming the variable(s)
// for: a non-integer or negative value, RANK >= WORLD_SIZE, LOCAL_RANK >= LOCAL_WORLD_SIZE,
// LOCAL_WORLD_SIZE > WORLD_SIZE, missing MASTER_ADDR / MASTER_PORT when WORLD_SIZE > 1, a port
// outside 1..65535, and TORCHELASTIC_USE_AGENT_STORE=True without TORCHELASTIC_RESTART_COUNT.
WorkerEnv worker_env_from(const std::function<const char*(const char*)>& getenv_fn = ::getenv);

}  // namespace llmt::dist
