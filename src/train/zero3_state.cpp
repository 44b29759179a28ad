// ZeRO-3's optimizers and checkpoint files (zero3_state.h).
#include "train/zero3_state.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/fs.h"
#include "core/safetensors.h"
#include "kernels/ops.h"
#include "models/hf_adapter.h"
#include "models/hf_weights.h"
#include "models/model.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/console.h"
#include "train/dist_context.h"

namespace llmt::train {

std::string zero3_optimizer_file(int rank, std::size_t unit) {
    return fmt::format("optimizer.rank{}.unit{}.safetensors", rank, unit);
}

std::string zero3_model_file(std::size_t unit, std::size_t units) {
    return fmt::format("model-{:05d}-of-{:05d}.safetensors", unit + 1, units);
}

Zero3State::Zero3State(DistContext& dc, models::Model& model, const MakeOptimizer& make)
    : dc_(dc), model_(model), gather_(dc, model.trained()) {
    const models::ParamStore& store = model.trained();
    for (std::size_t g = 0; g < store.groups().size(); ++g) {
        const optim::ArenaSlice s = slice_of(g, dc.rank());
        opts_.push_back(s.begin < s.end ? make(s) : nullptr);
    }
    model.set_unit_gather(&gather_);
}

Zero3State::~Zero3State() { model_.set_unit_gather(nullptr); }

optim::ArenaSlice Zero3State::slice_of(std::size_t g, int rank) const {
    const models::ParamStore::Group& gr = model_.trained().groups()[g];
    const auto r = static_cast<std::size_t>(rank);
    return {std::min(gr.begin + r * gr.chunk, gr.end), std::min(gr.begin + (r + 1) * gr.chunk, gr.end)};
}

double Zero3State::grad_sum_squares() {
    const models::ParamStore& store = model_.trained();
    const Tensor g(store.grads().data(), {static_cast<int64_t>(store.grads().nbytes() / sizeof(float))}, DType::kF32,
                   store.device());
    return dc_.sum(kernels::sum_squares(g));  // the chunks' padding is zero
}

void Zero3State::step(float lr, float grad_scale) {
    gather_.forget_unheld();  // gathered weights are stale once the masters move
    if (++steps_ == 1)
        console().line(fmt::format("zero3: the first step gathered {} units, {} of them prefetched while the unit "
                                   "before computed; {:.1f} MiB of gather buffers",
                                   gather_.counts().gathers, gather_.counts().prefetched,
                                   static_cast<double>(gather_.buffer_bytes()) / 1048576.0));
    models::ParamStore& store = model_.trained();
    auto* grads = static_cast<float*>(store.grads().data());
    for (std::size_t g = 0; g < opts_.size(); ++g) {
        if (!opts_[g]) continue;
        const std::size_t local = store.groups()[g].local;
        opts_[g]->step(store.masters() + local, grads + local, lr, grad_scale, {}, optim::Optimizer::ParamsAt::kChunk);
    }
}

std::vector<OptimizerShardFile> Zero3State::optimizer_files() const {
    std::vector<OptimizerShardFile> out;
    for (int k = 0; k < dc_.world(); ++k)
        for (std::size_t g = 0; g < opts_.size(); ++g) {
            const optim::ArenaSlice s = slice_of(g, k);
            if (s.begin < s.end) out.push_back({zero3_optimizer_file(k, g), s.begin, s.end});
        }
    return out;
}

void Zero3State::write_optimizer(const std::filesystem::path& dir) const {
    for (std::size_t g = 0; g < opts_.size(); ++g)
        if (opts_[g])
            write_safetensors(dir / zero3_optimizer_file(dc_.rank(), g), opts_[g]->state_tensors(),
                              opts_[g]->state_metadata());
}

std::size_t Zero3State::restore_optimizer(const Checkpoint& ck, const std::vector<OptimizerShardFile>& index) {
    std::size_t read = 0;
    for (std::size_t g = 0; g < opts_.size(); ++g)
        if (opts_[g]) read += restore_optimizer_state(*opts_[g], ck, index, slice_of(g, dc_.rank()));
    return read;
}

std::vector<std::string> Zero3State::write_model(const std::filesystem::path& dir) {
    const models::ParamStore& store = model_.trained();
    const auto& groups = store.groups();
    nlohmann::json weight_map = nlohmann::json::object();
    std::uint64_t total = 0;
    std::vector<std::string> files;
    for (std::size_t g = 0; g < groups.size(); ++g) {
        const models::ParamStore::Group& gr = groups[g];
        const std::string file = zero3_model_file(g, groups.size());
        files.push_back(file);
        std::vector<models::ParamSpec> specs(store.specs().begin() + static_cast<std::ptrdiff_t>(gr.first),
                                             store.specs().begin() + static_cast<std::ptrdiff_t>(gr.last));
        for (const auto& s : specs)
            for (const auto& p : s.hf) {
                weight_map[p.name] = file;
                std::uint64_t n = static_cast<std::uint64_t>(p.rows);
                for (std::size_t d = 1; d < s.shape.size(); ++d) n *= static_cast<std::uint64_t>(s.shape[d]);
                total += n * sizeof(float);
            }
        const float* gathered = gather_.gather_masters(g);  // a collective: every rank, every unit
        if (static_cast<int>(g % static_cast<std::size_t>(dc_.world())) != dc_.rank()) continue;
        const std::size_t n = gr.end - gr.begin;
        std::vector<float> host;
        if (store.device() != Device::kCpu) {
            host.resize(n);
            kernels::copy(
                Tensor(host.data(), {static_cast<int64_t>(n)}),
                Tensor(const_cast<float*>(gathered), {static_cast<int64_t>(n)}, DType::kF32, store.device()));
            gathered = host.data();
        }
        std::vector<const float*> data;
        for (models::ParamId id = gr.first; id < gr.last; ++id)
            data.push_back(gathered + (store.params().entry(id).offset / sizeof(float) - gr.begin));
        std::vector<std::vector<float>> scratch;
        write_safetensors(dir / file, models::hf_tensors(specs, data, scratch), {{"format", "pt"}});
    }
    if (dc_.rank() == 0)
        write_file_atomic(dir / models::kHfIndexFile,
                          nlohmann::json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) +
                              "\n");
    files.push_back(std::string(models::kHfIndexFile));
    return files;
}

}  // namespace llmt::train
