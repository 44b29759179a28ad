// ZeRO stages on paper (zero_scale.h).
#include "train/zero_scale.h"

#include <algorithm>

#include "config/config.h"
#include "models/registry.h"

namespace llmt::train {

const char* zero_stage_name(ZeroStage s) {
    switch (s) {
        case ZeroStage::k0: return "0";
        case ZeroStage::k1: return "1";
        case ZeroStage::k3: return "3";
    }
    return "?";
}

StageCost stage_cost(const ScaleModel& m, ZeroStage stage, int world) {
    const double P = m.parameters, N = world, share = (N - 1) / N;
    const double master = 4, copy = m.bf16 ? 2 : 0, grad = 4, opt = 4.0 * m.moments;  // bytes per parameter
    StageCost c;
    switch (stage) {
        case ZeroStage::k0:
            c.bytes_per_gpu = P * (master + copy + grad + opt);
            c.comm_bytes = 2 * share * grad * P;  // ring all-reduce of the fp32 gradients
            break;
        case ZeroStage::k1:
            // The compute weights (the bf16 copy, else the fp32 weights, which are then the masters) and the
            // gradients whole; the bf16 run's fp32 masters and the moments divided.
            c.bytes_per_gpu = P * ((m.bf16 ? copy : master) + grad) + P * ((m.bf16 ? master : 0) + opt) / N;
            // Reduce-scatter the gradients, all-gather the compute weights.
            c.comm_bytes = share * (grad + (m.bf16 ? copy : master)) * P;
            break;
        case ZeroStage::k3: {
            const double w = m.bf16 ? copy : master;
            // The fp32 masters, the fp32 gradient accumulator and the moments of the rank's chunks (no whole
            // compute copy: a unit is converted as it is gathered), plus the four gather buffers: the
            // embeddings' unit, the final unit (the head when untied) and two blocks (the one computing and
            // the prefetched next), each with its compute weights and fp32 gradient.
            const double held = m.embedding * (m.tied ? 1 : 2) + 2 * m.largest_layer;
            c.bytes_per_gpu = P * (master + grad + opt) / N + held * (w + grad);
            c.comm_bytes = share * (2 * w + grad) * P;  // weights gathered for forward and backward
            break;
        }
    }
    return c;
}

ScaleModel scale_model(const config::Config& cfg) {
    const auto plan = models::plan_model_memory(cfg, Device::kCpu, DType::kF32, 1, 1);
    ScaleModel m;
    m.parameters = static_cast<double>(plan.grads) / 4;  // the fp32 gradient arena: one float per trained parameter
    const double emb = static_cast<double>(cfg.model.padded_vocab_size()) * cfg.model.d_model;
    const double tables = cfg.model.tie_embeddings ? emb : 2 * emb;
    m.largest_layer =
        cfg.model.n_layer > 0 ? std::max(0.0, m.parameters - tables) / cfg.model.n_layer : m.parameters;
    m.embedding = std::min(m.parameters, emb);
    m.tied = cfg.model.tie_embeddings;
    m.bf16 = cfg.trainer.precision == "bf16";
    m.moments = cfg.trainer.optimizer == "sgd" ? (cfg.trainer.momentum != 0 ? 1 : 0) : 2;
    return m;
}

StageChoice choose_stage(const ScaleModel& m, double gpu_bytes, double reserve, const std::vector<int>& worlds) {
    for (int n : worlds)
        for (ZeroStage s : {ZeroStage::k0, ZeroStage::k1, ZeroStage::k3}) {
            if (n == 1 && s != ZeroStage::k0) continue;
            const double b = stage_cost(m, s, n).bytes_per_gpu;
            if (b + reserve <= gpu_bytes) return {n, zero_stage_name(s), b};
        }
    return {};
}

}  // namespace llmt::train
