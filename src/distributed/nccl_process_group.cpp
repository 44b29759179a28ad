// NcclProcessGroup (see nccl_process_group.h). The communicator is non-blocking (ncclConfig_t.blocking =
// 0), so neither its creation nor any enqueue can hang the host: ncclInProgress is polled against the
// timeout. Completion is tracked with one CUDA event per collective; the watchdog thread retires them,
// checks ncclCommGetAsyncError, and calls ncclCommAbort when the oldest one is older than the timeout
// (NCCL's kernels poll the abort flag, so the stuck kernel ends and the streams drain).
#include "distributed/nccl_process_group.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "core/error.h"
#include "distributed/store.h"
#include "kernels/cuda/runtime.h"

namespace llmt::dist {
namespace {

std::atomic<int> g_group_seq{0};

using Clock = std::chrono::steady_clock;

double seconds(std::chrono::milliseconds ms) { return static_cast<double>(ms.count()) / 1000.0; }

ncclDataType_t nccl_dtype(DType t) {
    switch (t) {
        case DType::kF32: return ncclFloat32;
        case DType::kBF16: return ncclBfloat16;
        case DType::kI32: return ncclInt32;
        default: break;
    }
    throw InternalError(fmt::format("nccl: unsupported dtype {}", dtype_name(t)));
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::kAvg ? ncclAvg : ncclSum; }

}  // namespace

NcclProcessGroup::NcclProcessGroup(Store& store, int rank, int size, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), timeout_(timeout) {
    LLMT_INTERNAL_CHECK(size >= 1 && rank >= 0 && rank < size, "process group: rank {} outside 0..{}", rank, size - 1);
    LLMT_CUDA_CHECK(cudaGetDevice(&device_));
    // Keys of this group: a restarted job (TORCHELASTIC_RESTART_COUNT) or a later group of the same
    // process never reads an earlier group's id from a store that outlived it (as Gloo's keys).
    const char* restarts = std::getenv("TORCHELASTIC_RESTART_COUNT");
    const std::string prefix = fmt::format("nccl/r{}/g{}/", restarts && *restarts ? restarts : "0",
                                           g_group_seq.fetch_add(1));
    name_ = fmt::format("nccl group {} (rank {} of {}, GPU {})", prefix.substr(0, prefix.size() - 1), rank, size,
                        device_);
    try {
        ncclUniqueId id;
        if (rank == 0) {
            const ncclResult_t r = ncclGetUniqueId(&id);
            if (r != ncclSuccess)
                throw DistError(fmt::format("{}: ncclGetUniqueId failed: {} ({})", name_, ncclGetErrorString(r),
                                            ncclGetLastError(nullptr)));
            store.set(prefix + "id", std::string(reinterpret_cast<const char*>(&id), sizeof id));
        } else {
            const auto saved = store.timeout();
            store.set_timeout(timeout);
            std::string v;
            try {
                v = store.get(prefix + "id");
            } catch (...) {
                store.set_timeout(saved);
                throw;
            }
            store.set_timeout(saved);
            LLMT_CHECK_AS(DistError, v.size() == sizeof id,
                          "{}: the ncclUniqueId in the store has {} bytes, expected {}", name_, v.size(), sizeof id);
            std::memcpy(&id, v.data(), sizeof id);
        }
        LLMT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        LLMT_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
        LLMT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&scratch_), sizeof(float)));
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;  // init and enqueues return ncclInProgress instead of blocking: we poll with a deadline
        const ncclResult_t r = ncclCommInitRankConfig(&comm_, size, id, rank, &config);
        check_nccl(r, "ncclCommInitRankConfig", "communicator creation");
    } catch (...) {
        if (comm_) ncclCommAbort(comm_);
        if (scratch_) cudaFree(scratch_);
        if (ready_) cudaEventDestroy(ready_);
        if (stream_) cudaStreamDestroy(stream_);
        throw;
    }
    watchdog_ = std::thread([this] { watchdog_loop(); });
}

NcclProcessGroup::~NcclProcessGroup() {
    const bool unwinding = std::uncaught_exceptions() > 0;
    // Let queued collectives finish while the watchdog still guards them (it aborts past the timeout).
    if (!unwinding) {
        for (;;) {
            {
                std::lock_guard<std::mutex> lock(mu_);
                if (failed_) break;
            }
            const cudaError_t e = cudaStreamQuery(stream_);
            if (e != cudaErrorNotReady) break;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
    bool abandoned = aborted_;
    if (!aborted_ && comm_) {
        bool clean = !unwinding && !failed_;
        if (clean) {
            // Finalize flushes the communicator's outstanding work with its peers; bounded by the timeout.
            ncclResult_t r = ncclCommFinalize(comm_);
            const auto deadline = Clock::now() + timeout_;
            while (r == ncclInProgress && Clock::now() < deadline) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                if (ncclCommGetAsyncError(comm_, &r) != ncclSuccess) r = ncclInternalError;
            }
            clean = r == ncclSuccess;
        }
        if (clean) {
            ncclCommDestroy(comm_);
        } else {
            ncclCommAbort(comm_);
            abandoned = true;
        }
        comm_ = nullptr;
    }
    if (abandoned) {
        // The aborted collectives' kernels end on NCCL's abort flag, but nothing here waits for them:
        // the stream, events and scratch float are left to the process's exit (a broken group is never
        // replaced; the worker exits).
        return;
    }
    cudaStreamSynchronize(stream_);
    cudaGetLastError();  // a destructor reports nothing; leave no sticky error for the next CUDA call
    for (auto& p : pending_) free_events_.push_back(p.done);
    for (CUevent_st* ev : free_events_) cudaEventDestroy(ev);
    cudaEventDestroy(ready_);
    cudaFree(scratch_);
    cudaStreamDestroy(stream_);
}

// Every NCCL call on comm_ happens under mu_ after checking aborted_, so the watchdog's abort (also under
// mu_) never frees the communicator in the middle of a call; the calls themselves never block (the
// communicator is non-blocking), so holding mu_ across one is short.
void NcclProcessGroup::check_nccl(int result, const char* call, const std::string& op) {
    ncclResult_t r = static_cast<ncclResult_t>(result);
    if (r == ncclInProgress) {
        // Non-blocking communicator: the call (creation, or a first collective's connection setup) goes on
        // in NCCL's threads; it completes when every rank takes part.
        const auto deadline = Clock::now() + timeout_;
        while (r == ncclInProgress) {
            if (Clock::now() > deadline) {
                fail(fmt::format("{}: {} ({}) did not complete within {:.1f} s: a rank is dead, stuck or never "
                                 "reached it; the communicator was aborted",
                                 name_, call, op, seconds(timeout_)),
                     true);
            }
            std::this_thread::sleep_for(std::chrono::microseconds(100));
            std::lock_guard<std::mutex> lock(mu_);
            if (aborted_) break;
            const ncclResult_t q = ncclCommGetAsyncError(comm_, &r);
            if (q != ncclSuccess) r = q;
        }
    }
    if (r == ncclSuccess) return;
    throw_if_failed();  // aborted meanwhile by the watchdog: its verdict is the error
    std::string last;
    {
        std::lock_guard<std::mutex> lock(mu_);
        const char* l = comm_ && !aborted_ ? ncclGetLastError(comm_) : ncclGetLastError(nullptr);
        if (l && *l) last = std::string(": ") + l;
    }
    fail(fmt::format("{}: {} ({}) failed: {}{}; the communicator was aborted", name_, call, op,
                     ncclGetErrorString(r), last),
         false);
}

void NcclProcessGroup::fail(const std::string& msg, bool timeout) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        abort_locked(msg, timeout);
    }
    if (timeout) throw DistTimeout(msg);
    throw DistError(msg);
}

// mu_ held. Only the first failure is kept: later ones are consequences of the abort.
void NcclProcessGroup::abort_locked(const std::string& msg, bool timeout) {
    if (!failed_) {
        failed_ = true;
        failed_timeout_ = timeout;
        error_ = msg;
    }
    if (!aborted_ && comm_) {
        aborted_ = true;
        // NCCL lets another thread abort a communicator whose kernels hang (this is what the watchdog is
        // for); the caller's thread never calls NCCL without checking aborted_ under mu_ first.
        ncclCommAbort(comm_);
        comm_ = nullptr;
    }
}

void NcclProcessGroup::throw_if_failed() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_) return;
    if (failed_timeout_) throw DistTimeout(error_);
    throw DistError(error_);
}

CUevent_st* NcclProcessGroup::take_event() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!free_events_.empty()) {
            CUevent_st* ev = free_events_.back();
            free_events_.pop_back();
            return ev;
        }
    }
    cudaEvent_t ev = nullptr;
    LLMT_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    return ev;
}

void NcclProcessGroup::check_tensor(const Tensor& t, const char* op, const char* what, bool allow_avg) const {
    LLMT_CHECK(t.device == Device::kCuda, "{}: {} must be a CUDA tensor for the nccl backend, got {} (dist.backend "
               "nccl trains on run.device cuda; CPU tensors go through gloo)", op, what, t.describe());
    LLMT_INTERNAL_CHECK(t.dtype == DType::kF32 || t.dtype == DType::kBF16 || t.dtype == DType::kI32,
               "{}: {} must be f32, bf16 or i32, got {}", op, what, t.describe());
    LLMT_INTERNAL_CHECK(allow_avg || t.dtype != DType::kI32, "{}: average needs f32 or bf16, got {}", op,
                        t.describe());
    LLMT_INTERNAL_CHECK(t.data != nullptr || t.numel() == 0, "{}: {} has no data", op, what);
    if (t.numel() == 0) return;
    cudaPointerAttributes attr{};
    const cudaError_t e = cudaPointerGetAttributes(&attr, t.data);
    if (e != cudaSuccess) cudaGetLastError();
    LLMT_INTERNAL_CHECK(e == cudaSuccess && (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged),
               "{}: {} {} says cuda but its pointer is not GPU memory", op, what, t.describe());
    LLMT_INTERNAL_CHECK(attr.device == device_, "{}: {} lives on GPU {}, but {} uses GPU {}", op, what, attr.device,
                        name_, device_);
}

template <typename F>
CUevent_st* NcclProcessGroup::enqueue(const std::string& op, F&& call) {
    throw_if_failed();
    // After everything the compute stream holds now (the producer of the data), on our own stream.
    LLMT_CUDA_CHECK(cudaEventRecord(ready_, kernels::cuda::stream()));
    LLMT_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
    const char* name = "nccl";
    ncclResult_t r = ncclSuccess;
    {
        std::lock_guard<std::mutex> lock(mu_);  // see check_nccl: no abort in the middle of the call
        if (!aborted_) r = call(comm_, &name);
    }
    throw_if_failed();
    check_nccl(r, name, op);
    CUevent_st* ev = take_event();
    LLMT_CUDA_CHECK(cudaEventRecord(ev, stream_));
    {
        std::lock_guard<std::mutex> lock(mu_);
        pending_.push_back({ev, Clock::now(), op});
    }
    cv_.notify_all();
    return ev;
}

void NcclProcessGroup::wait_done(CUevent_st* ev, const std::string& op) {
    // The host spins on the event (a few µs per check) rather than cudaEventSynchronize, so that the
    // watchdog's verdict (timeout, NCCL error) ends the wait even if the aborted kernel never finishes.
    int spins = 0;
    for (;;) {
        const cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess) break;
        if (e != cudaErrorNotReady) {
            cudaGetLastError();
            throw_if_failed();
            throw DeviceError(fmt::format("{}: cudaEventQuery after {} failed: {}: {}", name_, op,
                                          cudaGetErrorName(e), cudaGetErrorString(e)));
        }
        throw_if_failed();
        if (++spins > 200) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    throw_if_failed();  // completed because the communicator was aborted: the data is not the result
}

void NcclProcessGroup::allreduce(Tensor t, ReduceOp op) {
    check_tensor(t, "allreduce", "tensor", op == ReduceOp::kSum);
    if (t.numel() == 0) return;
    auto* ev = enqueue("allreduce", [&](ncclComm* c, const char** call) {
        *call = "ncclAllReduce";
        return ncclAllReduce(t.data, t.data, static_cast<size_t>(t.numel()), nccl_dtype(t.dtype), nccl_op(op), c,
                             stream_);
    });
    wait_done(ev, "allreduce");
}

void NcclProcessGroup::allreduce_async(Tensor t, ReduceOp op) {
    check_tensor(t, "allreduce_async", "tensor", op == ReduceOp::kSum);
    if (t.numel() == 0) return;
    enqueue("allreduce (async)", [&](ncclComm* c, const char** call) {
        *call = "ncclAllReduce";
        return ncclAllReduce(t.data, t.data, static_cast<size_t>(t.numel()), nccl_dtype(t.dtype), nccl_op(op), c,
                             stream_);
    });
}

void NcclProcessGroup::allgather_async(Tensor out, Tensor in) {
    check_tensor(out, "allgather_async", "out", true);
    check_tensor(in, "allgather_async", "in", true);
    LLMT_INTERNAL_CHECK(out.dtype == in.dtype && out.numel() == in.numel() * size_,
                        "allgather_async: out {} must hold {} x in {}", out.describe(), size_, in.describe());
    if (in.numel() == 0) return;
    enqueue("allgather (async)", [&](ncclComm* c, const char** call) {
        *call = "ncclAllGather";
        return ncclAllGather(in.data, out.data, static_cast<size_t>(in.numel()), nccl_dtype(in.dtype), c, stream_);
    });
}

void NcclProcessGroup::join_async() {
    throw_if_failed();
    CUevent_st* ev = take_event();
    LLMT_CUDA_CHECK(cudaEventRecord(ev, stream_));
    LLMT_CUDA_CHECK(cudaStreamWaitEvent(kernels::cuda::stream(), ev, 0));
    {
        std::lock_guard<std::mutex> lock(mu_);
        pending_.push_back({ev, Clock::now(), "join of asynchronous all-reduces"});
    }
    cv_.notify_all();
}

void NcclProcessGroup::reduce_scatter(Tensor out, Tensor in, ReduceOp op) {
    check_tensor(out, "reduce_scatter", "out", op == ReduceOp::kSum);
    check_tensor(in, "reduce_scatter", "in", op == ReduceOp::kSum);
    LLMT_INTERNAL_CHECK(out.dtype == in.dtype, "reduce_scatter: out {} and in {} differ in dtype", out.describe(),
               in.describe());
    LLMT_INTERNAL_CHECK(in.numel() == out.numel() * size_,
                        "reduce_scatter: in has {} elements, expected size {} x out {}", in.numel(), size_,
                        out.numel());
    if (out.numel() == 0) return;
    auto* ev = enqueue("reduce_scatter", [&](ncclComm* c, const char** call) {
        *call = "ncclReduceScatter";
        return ncclReduceScatter(in.data, out.data, static_cast<size_t>(out.numel()), nccl_dtype(out.dtype),
                                 nccl_op(op), c, stream_);
    });
    wait_done(ev, "reduce_scatter");
}

void NcclProcessGroup::allgather(Tensor out, Tensor in) {
    check_tensor(out, "allgather", "out", true);
    check_tensor(in, "allgather", "in", true);
    LLMT_INTERNAL_CHECK(out.dtype == in.dtype, "allgather: out {} and in {} differ in dtype", out.describe(),
                        in.describe());
    LLMT_INTERNAL_CHECK(out.numel() == in.numel() * size_, "allgather: out has {} elements, expected size {} x in {}",
               out.numel(), size_, in.numel());
    if (in.numel() == 0) return;
    auto* ev = enqueue("allgather", [&](ncclComm* c, const char** call) {
        *call = "ncclAllGather";
        return ncclAllGather(in.data, out.data, static_cast<size_t>(in.numel()), nccl_dtype(in.dtype), c, stream_);
    });
    wait_done(ev, "allgather");
}

void NcclProcessGroup::broadcast(Tensor t, int root) {
    check_tensor(t, "broadcast", "tensor", true);
    LLMT_INTERNAL_CHECK(root >= 0 && root < size_, "broadcast: root {} outside 0..{}", root, size_ - 1);
    if (t.numel() == 0) return;
    auto* ev = enqueue("broadcast", [&](ncclComm* c, const char** call) {
        *call = "ncclBroadcast";
        return ncclBroadcast(t.data, t.data, static_cast<size_t>(t.numel()), nccl_dtype(t.dtype), root, c, stream_);
    });
    wait_done(ev, "broadcast");
}

void NcclProcessGroup::barrier() {
    // NCCL has no barrier: a one-float all-reduce every rank must join, waited for on the host.
    auto* ev = enqueue("barrier", [&](ncclComm* c, const char** call) {
        *call = "ncclAllReduce";
        return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, c, stream_);
    });
    wait_done(ev, "barrier");
}

void NcclProcessGroup::watchdog_loop() {
    cudaSetDevice(device_);  // event queries need this thread on the group's GPU
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
        cv_.wait_for(lock, std::chrono::milliseconds(50));
        if (stop_) break;
        if (aborted_) continue;
        std::string problem;
        bool timed_out = false;
        while (!pending_.empty()) {
            const cudaError_t e = cudaEventQuery(pending_.front().done);
            if (e == cudaSuccess) {
                free_events_.push_back(pending_.front().done);
                pending_.pop_front();
                continue;
            }
            if (e != cudaErrorNotReady) {
                cudaGetLastError();
                problem = fmt::format("{}: the GPU failed during {}: {}: {}; the communicator was aborted", name_,
                                      pending_.front().op, cudaGetErrorName(e), cudaGetErrorString(e));
            } else if (Clock::now() - pending_.front().queued > timeout_) {
                timed_out = true;
                problem = fmt::format("{}: {} did not complete within {:.1f} s (a peer is dead, stuck, or calls "
                                      "another collective); the communicator was aborted",
                                      name_, pending_.front().op, seconds(timeout_));
            }
            break;
        }
        if (problem.empty() && !pending_.empty() && comm_) {
            // A peer's transport error (a closed socket, a failed proxy) shows here before any timeout.
            ncclResult_t async = ncclSuccess;
            if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess &&
                async != ncclInProgress) {
                const char* last = ncclGetLastError(comm_);
                problem = fmt::format("{}: NCCL reported {} during {}{}{}; the communicator was aborted", name_,
                                      ncclGetErrorString(async), pending_.front().op, last && *last ? ": " : "",
                                      last ? last : "");
            }
        }
        if (!problem.empty()) abort_locked(problem, timed_out);
    }
}

}  // namespace llmt::dist
