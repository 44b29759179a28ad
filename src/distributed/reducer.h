// Reducer: DDP's gradient all-reduce over the flat gradient arena (core/arena.h), in buckets that are
// launched on a communication thread while backward still runs (torch DDP's Reducer, narrowed to one
// contiguous f32 buffer). On a GPU (device kCuda, nccl) the buckets are queued on the process group's
// communication stream instead, with no thread and no host wait. docs/distributed.md.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace llmt::dist {

class ProcessGroup;

// The model's backward runs layers in reverse arena order, so the gradients that are final always form
// a suffix of the arena: the model calls grads_ready_from(offset) with a decreasing byte offset and
// every bucket lying wholly at or after it is launched at once. Buckets are cut from the end of the
// arena backwards, bucket_bytes each (rounded down to whole floats, at least one), the last (lowest)
// one smaller; overlap=false all-reduces everything in finish().
// Thread safety: begin_backward / grads_ready_from / finish / last_stats from one thread (the
// trainer's); between begin_backward(true) and finish() only the Reducer's thread uses the process
// group, and the launched ranges of `grads` must not be written.
// Device kCuda (grads in GPU memory; pg.has_async(), i.e. nccl): the model's hook fires on the host when
// backward's kernels are queued, not done, so each launched bucket's all-reduce (avg) is queued on the
// group's communication stream behind an event of the compute stream (ProcessGroup::allreduce_async);
// finish() only makes the compute stream wait for the communication stream, so the host never blocks
// (timeouts come from the group's watchdog and surface at the next finish() or collective).
class Reducer {
public:
    Reducer(ProcessGroup& pg, void* grads, size_t nbytes /* f32 */, size_t bucket_bytes, bool overlap,
            Device device = Device::kCpu);
    ~Reducer();
    Reducer(const Reducer&) = delete;
    Reducer& operator=(const Reducer&) = delete;

    // Starts a backward. sync=false is a no_sync micro-step: nothing is communicated and finish()
    // returns at once, leaving the gradients as they are.
    void begin_backward(bool sync);
    // Gradients at and after byte_offset are final. May be called many times per backward; a no-op
    // when !sync or !overlap.
    void grads_ready_from(size_t byte_offset);
    // Launches what is left, waits for every bucket and rethrows the first communication error
    // (DistError / DistTimeout). Afterwards every rank holds sum / world_size in `grads`.
    void finish();

    struct Stats {
        double comm_s = 0;  // time the communication thread spent in all-reduce this backward (CPU only)
        double wait_s = 0;  // time finish() blocked waiting for it (CUDA: queueing the join only)
        int buckets = 0;    // buckets all-reduced this backward
    };
    Stats last_stats() const;

    size_t num_buckets() const { return buckets_.size(); }
    // Byte ranges [offset, offset + nbytes) of the buckets, last in the arena first (for tests and logs).
    std::vector<std::pair<size_t, size_t>> bucket_ranges() const;

private:
    struct Bucket {
        size_t offset, nbytes;
    };
    void launch_until(size_t byte_offset);
    void comm_loop();

    ProcessGroup& pg_;
    char* grads_;
    size_t nbytes_;
    bool overlap_;
    Device device_;
    std::vector<Bucket> buckets_;  // buckets_[0] is the last one in the arena
    size_t next_bucket_ = 0;       // first bucket not launched yet
    bool sync_ = false;
    bool in_backward_ = false;

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<size_t> queue_;  // launched bucket indices
    size_t done_ = 0;           // buckets finished (or skipped after an error) this backward
    bool stop_ = false;
    std::exception_ptr error_;
    Stats stats_, last_;
    std::thread thread_;
};

}  // namespace llmt::dist
