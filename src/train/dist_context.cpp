#include "train/dist_context.h"

#include <fmt/format.h>

#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace llmt::train {

DistContext DistContext::create(const config::Config& cfg) {
    DistContext c;
    c.env_ = dist::worker_env_from();
    if (!c.env_.distributed()) return c;
    std::string backend = cfg.dist.backend;
    if (backend == "auto") backend = "gloo";  // the CPU engine; the CUDA backend will choose nccl
    if (backend == "nccl")
        throw InputError("dist.backend: nccl needs run.device: cuda, and this build trains on the CPU; use gloo or auto");
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg.dist.timeout_sec * 1000));
    c.store_ = dist::make_tcp_store(c.env_.master_addr, c.env_.master_port, c.env_.rank == 0, c.env_.world_size,
                                    timeout);
    // Keys per launch attempt: a worker restarted by its launcher must not complete a rendezvous with
    // peers of the previous attempt that are still alive on another node.
    dist::rendezvous(*c.store_, c.env_.rank, c.env_.world_size, timeout,
                     fmt::format("rdzv/attempt{}/", c.env_.restart_count));
    c.pg_ = dist::make_process_group(backend, *c.store_, c.env_.rank, c.env_.world_size, timeout);
    return c;
}

double DistContext::mean(double v) {
    if (!active()) return v;
    // The collectives are f32: ~1e-7 relative, far below what logging and the cross-world-size loss
    // comparison (1e-5) need.
    float x = static_cast<float>(v);
    pg_->allreduce(Tensor(&x, {1}), dist::ReduceOp::kAvg);
    return x;
}

std::string DistContext::from_rank0(const std::string& key, const std::string& value) {
    if (!active()) return value;
    const std::string k = "train/" + key;
    if (rank() == 0) {
        store_->set(k, value);
        return value;
    }
    return store_->get(k);
}

void DistContext::barrier() {
    if (active()) pg_->barrier();
}

}  // namespace llmt::train
