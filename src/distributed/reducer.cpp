// Reducer (see reducer.h): a queue of launched buckets drained by one communication thread (CPU), or
// buckets queued straight onto the process group's communication stream (CUDA).
#include "distributed/reducer.h"

#include <chrono>

#include "core/check.h"
#include "core/tensor.h"
#include "distributed/process_group.h"

namespace llmt::dist {

Reducer::Reducer(ProcessGroup& pg, void* grads, size_t nbytes, size_t bucket_bytes, bool overlap, Device device)
    : pg_(pg), grads_(static_cast<char*>(grads)), nbytes_(nbytes), overlap_(overlap), device_(device) {
    LLMT_INTERNAL_CHECK(nbytes % sizeof(float) == 0, "reducer: gradient buffer of {} bytes is not whole f32 values",
                        nbytes);
    LLMT_INTERNAL_CHECK(grads != nullptr || nbytes == 0, "reducer: no gradient buffer");
    size_t b = bucket_bytes / sizeof(float) * sizeof(float);
    if (b == 0) b = sizeof(float);
    size_t end = nbytes;
    while (end > 0) {
        size_t len = end >= b ? b : end;
        buckets_.push_back({end - len, len});
        end -= len;
    }
    if (device_ == Device::kCpu) {
        thread_ = std::thread([this] { comm_loop(); });
    } else {
        LLMT_CHECK(pg.has_async(), "reducer: gradients on {} need a process group with device streams (nccl), got {}",
                   device_name(device_), pg.backend());
    }
}

std::vector<std::pair<size_t, size_t>> Reducer::bucket_ranges() const {
    std::vector<std::pair<size_t, size_t>> r;
    for (const auto& b : buckets_) r.emplace_back(b.offset, b.nbytes);
    return r;
}

Reducer::~Reducer() {
    if (!thread_.joinable()) return;
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void Reducer::begin_backward(bool sync) {
    LLMT_ASSERT(!in_backward_ || !sync_);  // finish() ends every synchronised backward
    std::lock_guard<std::mutex> lock(mu_);
    sync_ = sync;
    in_backward_ = true;
    next_bucket_ = 0;
    done_ = 0;
    queue_.clear();
    error_ = nullptr;
    stats_ = Stats{};
}

void Reducer::grads_ready_from(size_t byte_offset) {
    if (!in_backward_ || !sync_ || !overlap_) return;
    launch_until(byte_offset);
}

void Reducer::launch_until(size_t byte_offset) {
    size_t first = next_bucket_;
    while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].offset >= byte_offset) ++next_bucket_;
    if (next_bucket_ == first) return;
    if (device_ != Device::kCpu) {
        // Queued behind the compute stream's work so far, which includes the kernels that wrote these
        // gradients; an error here (a failed group) is thrown to the trainer at once.
        for (size_t i = first; i < next_bucket_; ++i) {
            const Bucket& b = buckets_[i];
            pg_.allreduce_async(
                Tensor(grads_ + b.offset, {static_cast<int64_t>(b.nbytes / sizeof(float))}, DType::kF32, device_),
                ReduceOp::kAvg);
            stats_.buckets++;
        }
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t i = first; i < next_bucket_; ++i) queue_.push_back(i);
    }
    cv_.notify_all();
}

void Reducer::finish() {
    LLMT_ASSERT(in_backward_);
    in_backward_ = false;
    if (!sync_) {
        std::lock_guard<std::mutex> lock(mu_);
        last_ = Stats{};
        return;
    }
    auto t0 = std::chrono::steady_clock::now();
    if (device_ != Device::kCpu) {
        launch_until(0);
        pg_.join_async();  // the compute stream waits for the communication stream; the host does not
        stats_.wait_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::lock_guard<std::mutex> lock(mu_);
        last_ = stats_;
        return;
    }
    launch_until(0);
    t0 = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_ == buckets_.size(); });
    stats_.wait_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    last_ = stats_;
    if (error_) std::rethrow_exception(error_);
}

Reducer::Stats Reducer::last_stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
}

void Reducer::comm_loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        size_t i = queue_.front();
        queue_.pop_front();
        bool failed = error_ != nullptr;
        lock.unlock();
        double secs = 0;
        std::exception_ptr err;
        if (!failed) {  // after an error the group is broken: the rest are only counted
            const Bucket& b = buckets_[i];
            auto t0 = std::chrono::steady_clock::now();
            try {
                pg_.allreduce(Tensor(grads_ + b.offset, {static_cast<int64_t>(b.nbytes / sizeof(float))}),
                              ReduceOp::kAvg);
            } catch (...) {
                err = std::current_exception();
            }
            secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        lock.lock();
        if (err && !error_) error_ = err;
        if (!failed && !err) stats_.buckets++;
        stats_.comm_s += secs;
        ++done_;
        if (done_ == buckets_.size()) cv_.notify_all();
    }
}

}  // namespace llmt::dist
