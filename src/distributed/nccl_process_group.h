// NcclProcessGroup: ProcessGroup on NCCL for CUDA tensors, one process per GPU (torch's ProcessGroupNCCL,
// narrowed). Rank 0's ncclUniqueId goes through our Store; one non-blocking communicator per group;
// collectives run on the group's own stream after the compute stream's queued work; a watchdog thread
// aborts the communicator when a collective outlives the timeout (torch's NCCL watchdog), so a dead
// peer becomes DistTimeout on every survivor instead of a hang. Built only with LLMTRAIN_CUDA.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/process_group.h"

struct ncclComm;
struct CUevent_st;
struct CUstream_st;

namespace llmt::dist {

// Thread safety: one thread at a time calls the collectives (ProcessGroup's rule); the watchdog thread
// only queries events and the communicator's error and aborts it.
class NcclProcessGroup : public ProcessGroup {
public:
    // Uses the calling thread's current CUDA device (DistContext sets it from LOCAL_RANK first). Throws
    // DistTimeout when a rank does not reach the communicator within `timeout`, DistError/DeviceError
    // naming the NCCL/CUDA call that failed.
    NcclProcessGroup(Store& store, int rank, int size, std::chrono::milliseconds timeout);
    // Waits (bounded by the watchdog) for queued collectives; finalizes the communicator when leaving
    // normally, aborts it when unwinding an exception or after a failure (never waits on a dead peer).
    ~NcclProcessGroup() override;
    NcclProcessGroup(const NcclProcessGroup&) = delete;
    NcclProcessGroup& operator=(const NcclProcessGroup&) = delete;

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    std::string_view backend() const override { return "nccl"; }

    // Blocking: queued after the compute stream's work, and the host waits for completion (polling the
    // watchdog's verdict). f32/bf16 (sum, avg via ncclAvg) or i32 (sum) tensors on this group's GPU.
    void allreduce(Tensor t, ReduceOp op) override;
    void reduce_scatter(Tensor out, Tensor in, ReduceOp op) override;
    void allgather(Tensor out, Tensor in) override;
    void broadcast(Tensor t, int root) override;
    void barrier() override;

    bool has_async() const override { return true; }
    void allreduce_async(Tensor t, ReduceOp op) override;
    void allgather_async(Tensor out, Tensor in) override;
    void join_async() override;

    int device() const { return device_; }
    // "nccl/r<restart>/g<n> (rank r of w, GPU d)", as errors name the group.
    const std::string& name() const { return name_; }
    std::chrono::milliseconds timeout() const { return timeout_; }

private:
    struct Pending {
        CUevent_st* done;
        std::chrono::steady_clock::time_point queued;
        std::string op;
    };
    // Queues one NCCL call on the communication stream after the compute stream's work; returns its
    // completion event (owned by the watchdog list).
    template <typename F>
    CUevent_st* enqueue(const std::string& op, F&& call);
    void wait_done(CUevent_st* ev, const std::string& op);
    // Result of an NCCL call on the non-blocking communicator: ncclInProgress is polled to completion
    // (bounded by the timeout); an error aborts the group and throws DistError naming `call`.
    void check_nccl(int result, const char* call, const std::string& op);
    [[noreturn]] void fail(const std::string& msg, bool timeout);
    void throw_if_failed();
    void watchdog_loop();
    void abort_locked(const std::string& msg, bool timeout);
    CUevent_st* take_event();
    void check_tensor(const Tensor& t, const char* op, const char* what, bool allow_avg) const;

    int rank_, size_, device_ = 0;
    std::chrono::milliseconds timeout_;
    std::string name_;
    ncclComm* comm_ = nullptr;
    CUstream_st* stream_ = nullptr;  // communication stream
    CUevent_st* ready_ = nullptr;    // recorded on the compute stream before each collective
    float* scratch_ = nullptr;       // one device float for barrier()

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Pending> pending_;   // queued collectives, oldest first
    std::vector<CUevent_st*> free_events_;
    bool failed_ = false, failed_timeout_ = false, aborted_ = false, stop_ = false;
    std::string error_;
    std::thread watchdog_;
};

}  // namespace llmt::dist
