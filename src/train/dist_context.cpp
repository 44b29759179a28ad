#include "train/dist_context.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "core/tensor.h"
#include "distributed/worker_store.h"
#include "kernels/ops.h"
#include "models/param_store.h"

namespace llmt::train {

GradSync grad_sync_plan(const config::Config& cfg, int world) {
    GradSync g;
    if (world <= 1) return g;
    g.zero1 = cfg.dist.zero_stage == 1;
    g.zero3 = cfg.dist.zero_stage == 3;
    // ZeRO-3 under LoRA shards the frozen base; the adapters are all-reduced as under DDP.
    if (g.zero1 || (g.zero3 && cfg.lora.r == 0)) return g;
    // At least one float per bucket: the Reducer's unit of work.
    g.bucket_bytes = std::max<size_t>(static_cast<size_t>(cfg.dist.bucket_mb * 1024 * 1024), 4);
    g.overlap = cfg.dist.overlap;
    return g;
}

optim::ArenaSlice zero_shard(size_t numel, int world, int rank) {
    if (world <= 1) return {0, numel};
    const size_t chunk = numel / static_cast<size_t>(world);
    LLMT_INTERNAL_CHECK(chunk > 0 || numel == 0, "ZeRO-1: an arena of {} elements cannot be split over {} ranks",
                        numel, world);
    const size_t begin = static_cast<size_t>(rank) * chunk;
    return {begin, rank == world - 1 ? numel : begin + chunk};
}

DistContext DistContext::create(const config::Config& cfg, Device device) {
    DistContext c;
    c.env_ = dist::worker_env_from();
    if (!c.env_.distributed()) return c;
    std::string backend = cfg.dist.backend;
    if (backend == "auto") backend = device == Device::kCuda ? "nccl" : "gloo";
    if (backend == "nccl" && device != Device::kCuda)
        throw InputError("dist.backend: nccl reduces GPU tensors, and this run trains on the CPU (run.device "
                         "resolved to cpu); use dist.backend: gloo or auto, or run.device: cuda");
    if (backend == "gloo" && device == Device::kCuda)
        throw InputError("dist.backend: gloo reduces CPU tensors, and this run trains on the GPU (run.device "
                         "resolved to cuda); use dist.backend: nccl or auto");
    if (backend == "nccl") {
        if (!dist::nccl_available())
            throw InputError("dist.backend: nccl: this llmtrain was built without CUDA (LLMTRAIN_CUDA=OFF); use gloo "
                             "with run.device: cpu");
        // Before anything touches CUDA (the kernels' stream and the arenas are made on the current GPU).
        dist::use_gpu_of_local_rank(c.env_.local_rank);
        c.device_ = Device::kCuda;
    }
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg.dist.timeout_sec * 1000));
    c.store_ = dist::connect_worker_store(c.env_, timeout);
    // Keys per launch attempt: a worker restarted by its launcher must not complete a rendezvous with
    // peers of the previous attempt that are still alive on another node.
    dist::rendezvous(*c.store_, c.env_.rank, c.env_.world_size, timeout,
                     fmt::format("rdzv/attempt{}/", c.env_.restart_count));
    c.pg_ = dist::make_process_group(backend, *c.store_, c.env_.rank, c.env_.world_size, timeout);
    if (c.device_ == Device::kCuda) {
        c.scalar_.add("scalar", {1});
        c.scalar_.allocate(true, Device::kCuda);
    }
    return c;
}

double DistContext::reduce_scalar(double v, dist::ReduceOp op) {
    // The collectives are f32: ~1e-7 relative, far below what logging and the cross-world-size loss
    // comparison (1e-5) need.
    float x = static_cast<float>(v);
    if (device_ == Device::kCuda) {
        const Tensor d = scalar_.view(0);
        kernels::copy(d, Tensor(&x, {1}));
        pg_->allreduce(d, op);
        kernels::copy(Tensor(&x, {1}), d);
        return x;
    }
    pg_->allreduce(Tensor(&x, {1}), op);
    return x;
}

double DistContext::mean(double v) { return active() ? reduce_scalar(v, dist::ReduceOp::kAvg) : v; }

double DistContext::sum(double v) { return active() ? reduce_scalar(v, dist::ReduceOp::kSum) : v; }

void DistContext::sum(std::vector<double>& values) {
    if (!active() || values.empty()) return;
    std::vector<float> x(values.begin(), values.end());
    const Tensor host(x.data(), {static_cast<int64_t>(x.size())});
    if (device_ == Device::kCuda) {
        Arena staging;
        staging.add("sum", {host.numel()});
        staging.allocate(false, Device::kCuda);
        const Tensor d = staging.view(0);
        kernels::copy(d, host);
        pg_->allreduce(d, dist::ReduceOp::kSum);
        kernels::copy(host, d);
    } else {
        pg_->allreduce(host, dist::ReduceOp::kSum);
    }
    std::copy(x.begin(), x.end(), values.begin());
}

double DistContext::zero_reduce_grads(float* grads, size_t numel) {
    auto flat = [&](float* p, size_t n) { return Tensor(p, {static_cast<int64_t>(n)}, DType::kF32, device_); };
    if (!active()) return kernels::sum_squares(flat(grads, numel));
    const optim::ArenaSlice mine = zero_shard(numel, world(), rank());
    const size_t chunk = numel / static_cast<size_t>(world()), body = chunk * static_cast<size_t>(world());
    pg_->reduce_scatter(flat(grads + static_cast<size_t>(rank()) * chunk, chunk), flat(grads, body),
                        dist::ReduceOp::kAvg);
    // The remainder (fewer floats than ranks) belongs to the last rank; every rank must join the collective.
    if (body < numel) pg_->allreduce(flat(grads + body, numel - body), dist::ReduceOp::kAvg);
    return sum(kernels::sum_squares(flat(grads + mine.begin, mine.end - mine.begin)));
}

void DistContext::zero_gather_params(float* params, size_t numel, Tensor compute_copy) {
    if (!active()) return;
    LLMT_INTERNAL_CHECK(compute_copy.empty() || (compute_copy.dtype == DType::kBF16 &&
                                                 compute_copy.numel() == static_cast<int64_t>(numel)),
                        "ZeRO-1: the compute copy must be a bf16 view of the whole arena, got {}",
                        compute_copy.describe());
    const bool lp = !compute_copy.empty();
    const size_t elem = lp ? 2 : 4;
    char* base = lp ? static_cast<char*>(compute_copy.data) : reinterpret_cast<char*>(params);
    auto flat = [&](size_t first, size_t n) {
        return Tensor(base + first * elem, {static_cast<int64_t>(n)}, lp ? DType::kBF16 : DType::kF32, device_);
    };
    const size_t chunk = numel / static_cast<size_t>(world()), body = chunk * static_cast<size_t>(world());
    LLMT_INTERNAL_CHECK(chunk > 0, "ZeRO-1: an arena of {} elements cannot be split over {} ranks", numel, world());
    pg_->allgather(flat(0, body), flat(static_cast<size_t>(rank()) * chunk, chunk));
    if (body < numel) pg_->broadcast(flat(body, numel - body), world() - 1);
}

Arena DistContext::gather_masters(const models::ParamStore& store) {
    Arena host;
    if (rank() == 0) {
        for (const auto& e : store.params().entries()) host.add(e.name, std::vector<int64_t>(e.shape), e.dtype);
        host.allocate(true);
    }
    const size_t numel = store.arena_numel();
    auto flat = [](float* p, size_t n, Device d) { return Tensor(p, {static_cast<int64_t>(n)}, DType::kF32, d); };
    float* out = static_cast<float*>(host.data());
    if (!store.masters_sharded()) {
        if (rank() == 0) kernels::copy(flat(out, numel, Device::kCpu), flat(store.masters(), numel, store.device()));
        return host;
    }
    LLMT_INTERNAL_CHECK(active() && store.device() == device_, "gather_masters: sharded masters need the process "
                        "group's device ({}), the store is on {}", device_name(device_), device_name(store.device()));
    Arena piece;
    piece.add("piece", {static_cast<int64_t>(std::min(kGatherPiece, numel))});
    piece.allocate(false, device_);
    float* buf = static_cast<float*>(piece.data());
    for (int q = 0; q < world(); ++q) {
        const optim::ArenaSlice s = zero_shard(numel, world(), q);
        LLMT_INTERNAL_CHECK(q != rank() || (s.begin == store.master_begin() && s.end == store.master_end()),
                            "gather_masters: rank {} holds [{}, {}), zero_shard says [{}, {})", q,
                            store.master_begin(), store.master_end(), s.begin, s.end);
        for (size_t b = s.begin; b < s.end; b += kGatherPiece) {
            const size_t n = std::min(kGatherPiece, s.end - b);
            if (q == rank()) kernels::copy(flat(buf, n, device_), flat(store.masters() + (b - s.begin), n, device_));
            pg_->broadcast(flat(buf, n, device_), q);
            if (rank() == 0) kernels::copy(flat(out + b, n, Device::kCpu), flat(buf, n, device_));
        }
    }
    return host;
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
