// The store a training worker rendezvouses through, as torch's env:// rendezvous finds it
// (torch/distributed/rendezvous.py, _create_c10d_store): rank 0 serves it at MASTER_ADDR:MASTER_PORT,
// or, with TORCHELASTIC_USE_AGENT_STORE=True, the torchrun agent already does and every rank is a
// client. Under a torch <= 1.13 agent the keys live under "/worker/attempt_<restart count>" as torch's
// PrefixStore puts them; a torch 2.x agent makes a fresh store per restart and torch uses no prefix.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "distributed/env.h"
#include "distributed/store.h"

namespace llmt::dist {

std::unique_ptr<Store> connect_worker_store(const WorkerEnv& env, std::chrono::milliseconds timeout);

// Every key under prefix + "/" (torch's PrefixStore joins them so), over a store it owns.
std::unique_ptr<Store> make_prefix_store(const std::string& prefix, std::unique_ptr<Store> inner);

}  // namespace llmt::dist
