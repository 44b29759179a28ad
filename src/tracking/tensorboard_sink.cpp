#include "tracking/tensorboard_sink.h"

#include <chrono>
#include <cstdio>
#include <memory>

#include "tracking/tensorboard_writer.h"

namespace llmt::tracking {

TensorBoardSink::TensorBoardSink(std::filesystem::path dir, std::string config_text, int64_t step,
                                 std::function<void(const std::string&)> warn)
    : warn_(std::move(warn)) {
    if (!warn_) warn_ = [](const std::string& m) { std::fprintf(stderr, "tracking: %s\n", m.c_str()); };
    worker_ =
        std::thread([this, dir = std::move(dir), text = std::move(config_text), step] { work(dir, text, step); });
}

TensorBoardSink::~TensorBoardSink() { finish(); }

void TensorBoardSink::log(int64_t step, double wall_time, std::vector<std::pair<std::string, double>> scalars) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (finishing_ || done_) return;
        queue_.push_back({step, wall_time, std::move(scalars)});
    }
    cv_.notify_all();
}

void TensorBoardSink::work(const std::filesystem::path& dir, const std::string& config_text, int64_t step) {
    std::unique_ptr<TensorBoardWriter> w;
    try {
        w = std::make_unique<TensorBoardWriter>(dir);
        const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        w->write_text(step, now, "config", "```\n" + config_text + "```");  // markdown: keep the YAML verbatim
        w->flush();
        for (;;) {
            Item item;
            {
                std::unique_lock<std::mutex> lk(mu_);
                cv_.wait(lk, [this] { return !queue_.empty() || finishing_; });
                if (queue_.empty()) break;
                item = std::move(queue_.front());
                queue_.pop_front();
            }
            w->write_scalars(item.step, item.wall_time, item.scalars);
            w->flush();
        }
    } catch (const std::exception& e) {
        warn_(std::string("TensorBoard output stopped: ") + e.what());
    }
    std::lock_guard<std::mutex> lk(mu_);
    done_ = true;
    queue_.clear();
    cv_.notify_all();
}

void TensorBoardSink::finish() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        finishing_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
}

}  // namespace llmt::tracking
