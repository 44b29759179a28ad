// connect_worker_store and the key-prefixing Store (see worker_store.h).
#include "distributed/worker_store.h"

#include <fmt/format.h>

#include "distributed/tcp_store.h"

namespace llmt::dist {
namespace {

class PrefixStore : public Store {
public:
    PrefixStore(std::string prefix, std::unique_ptr<Store> inner)
        : prefix_(std::move(prefix) + "/"), inner_(std::move(inner)) {}

    void set(const std::string& key, const std::string& value) override { inner_->set(prefix_ + key, value); }
    std::string get(const std::string& key) override { return inner_->get(prefix_ + key); }
    int64_t add(const std::string& key, int64_t delta) override { return inner_->add(prefix_ + key, delta); }
    void wait(const std::vector<std::string>& keys) override { inner_->wait(prefixed(keys)); }
    bool check(const std::vector<std::string>& keys) override { return inner_->check(prefixed(keys)); }
    void set_timeout(std::chrono::milliseconds timeout) override { inner_->set_timeout(timeout); }
    std::chrono::milliseconds timeout() const override { return inner_->timeout(); }
    std::string describe() const override { return fmt::format("{} (keys under '{}')", inner_->describe(), prefix_); }

private:
    std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
        std::vector<std::string> out;
        for (const auto& k : keys) out.push_back(prefix_ + k);
        return out;
    }
    std::string prefix_;
    std::unique_ptr<Store> inner_;
};

}  // namespace

std::unique_ptr<Store> make_prefix_store(const std::string& prefix, std::unique_ptr<Store> inner) {
    return std::make_unique<PrefixStore>(prefix, std::move(inner));
}

std::unique_ptr<Store> connect_worker_store(const WorkerEnv& env, std::chrono::milliseconds timeout) {
    const bool serve = env.rank == 0 && !env.use_agent_store;
    auto store = std::make_unique<TcpStore>(env.master_addr, env.master_port, serve, env.world_size, timeout);
    if (env.use_agent_store && store->generation() == TorchStoreGeneration::kTorch1) {
        return make_prefix_store(fmt::format("/worker/attempt_{}", env.restart_count), std::move(store));
    }
    return store;
}

}  // namespace llmt::dist
