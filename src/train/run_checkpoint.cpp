// train/run_checkpoint.h.
#include "train/run_checkpoint.h"

#include <fmt/format.h>

#include <optional>
#include <vector>

#include "config/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "models/hf_adapter.h"
#include "models/model.h"
#include "models/peft.h"
#include "optim/optimizer.h"
#include "train/batches.h"
#include "train/console.h"
#include "train/dist_context.h"
#include "train/optimizer_shards.h"
#include "train/resume.h"
#include "train/task.h"
#include "train/train_state.h"
#include "train/zero3_state.h"

namespace llmt::train {

namespace {

void log_line(const std::string& s) { console().line(s); }

}  // namespace

std::filesystem::path RunCheckpoints::save(const std::filesystem::path& checkpoints_dir, const RunProgress& progress,
                                           const SaveOptions& opts) {
    const int rank = p_.dc.rank(), world = p_.dc.world();
    ++saves_;
    std::optional<CheckpointWriter> w;
    if (rank == 0) w.emplace(checkpoints_dir, progress.step, opts);
    if (p_.zero1 || p_.zero3) write_rank_files(w ? &*w : nullptr);
    // Device parameters are staged in host memory: the file is the same whichever device wrote it. Sharded
    // masters are gathered into rank 0's host memory (every rank sends its shard), so model.safetensors
    // holds the fp32 masters whole at stages 0 and 1 (ZeRO-3 wrote one file per unit above).
    Arena host_params;
    if (p_.model.trained().masters_sharded()) host_params = p_.dc.gather_masters(p_.model.trained());
    if (rank != 0) return {};
    if (!p_.zero3) {
        if (!host_params.allocated() && p_.model.device() != Device::kCpu)
            host_params = models::host_copy(p_.model.params());
        std::vector<std::vector<float>> scratch;
        w->write_tensors(
            kModelFile,
            models::hf_tensors(p_.model, host_params.allocated() ? host_params : p_.model.params(), scratch),
            {{"format", "pt"}});
    }
    if (!p_.zero1 && !p_.zero3) w->write_tensors(kOptimizerFile, p_.opt->state_tensors(), p_.opt->state_metadata());
    const std::vector<OptimizerShardFile> shards =
        p_.zero3 ? p_.zero3->optimizer_files() : optimizer_shard_files(p_.arena_numel, world, p_.zero1);
    nlohmann::json state = {{"step", progress.step},
                            {"tokens", progress.slots},
                            {"loader", p_.batches.state()},
                            {"best_val_loss", progress.best_loss.to_json()},
                            // the task's metric: the same field as above when it is the loss
                            {progress.best.key(), progress.best.to_json()},
                            {"world_size", world},
                            {"zero_stage", zero_stage()},
                            {"optimizer_shards", optimizer_index_json(shards)},
                            {"wall_s", progress.prior_wall},
                            {"config", p_.cfg.resolved}};
    if (p_.model.lora()) state["lora_base"] = p_.lora_base;
    w->write_state(state);
    // So the step dir loads in transformers (a model), or in PEFT beside its base (adapters).
    if (p_.model.lora())
        write_file_atomic(w->temp_dir() / models::kAdapterConfigFile,
                          models::peft_adapter_config(p_.model, p_.lora_base.value("init_from", "")).dump(2) + "\n");
    else if (auto note = p_.task.write_checkpoint_files(w->temp_dir()))
        log_line("checkpoint: " + *note);
    return w->commit();
}

void RunCheckpoints::write_rank_files(CheckpointWriter* w) {
    const int rank = p_.dc.rank();
    const std::filesystem::path tmp =
        p_.dc.from_rank0(fmt::format("ckpt_tmp/{}", saves_), rank == 0 ? w->temp_dir().string() : "");
    if (p_.zero3) {  // this rank's optimizer chunks and the units it owns
        p_.zero3->write_optimizer(tmp);
        p_.zero3->write_model(tmp);
    } else if (rank == 0) {
        w->write_tensors(zero_optimizer_file(0), p_.opt->state_tensors(), p_.opt->state_metadata());
    } else {
        write_safetensors(tmp / zero_optimizer_file(rank), p_.opt->state_tensors(), p_.opt->state_metadata());
    }
    p_.dc.barrier();
}

void RunCheckpoints::restore(const std::string& path, RunProgress& progress) {
    Checkpoint ck = load_checkpoint(path);
    const std::filesystem::path state_file = ck.dir / kStateFile;
    const TrainState st = parse_train_state(ck.state, state_file);
    if (!ck.checksummed)
        log_line(fmt::format("resume: '{}' predates per-tensor checksums: its tensors were checked for NaN/inf "
                             "but not verified",
                             ck.dir.string()));
    ConfigDiff diff = diff_for_resume(st.config, p_.cfg.resolved);
    if (!diff.identity.empty()) {
        std::string msg = fmt::format("cannot resume from '{}': its model or data differ from this config:",
                                      ck.dir.string());
        for (const auto& l : diff.identity) msg += "\n  " + l;
        throw InputError(msg + "\n(hint: start a new run, or resume with the checkpoint's config.yaml)");
    }
    for (const auto& l : diff.cadence) log_line("resume: changed " + l);
    for (const auto& l : diff.other) log_line("resume: changed " + l);
    if (p_.model.lora())
        models::check_lora_base(ck.state.value("lora_base", nlohmann::json()), p_.lora_base, ck.dir.string());
    models::load_trained_params(p_.model, models::HfWeightsSource(ck.model));
    restore_optimizer(ck, st);
    try {
        p_.batches.restore(st.loader);
    } catch (const InputError& e) {
        throw CheckpointError(fmt::format("'{}': field \"loader\": {}", state_file.string(), e.what()));
    }
    progress.step = ck.step;
    progress.slots = st.tokens;
    progress.best_loss.restore(ck.state, state_file);
    progress.best.restore(ck.state, state_file);
    progress.prior_wall = st.wall_s;
    const CountUnit u = p_.task.unit();
    log_line(fmt::format("resume: {} at step {} ({} {} seen)", ck.dir.string(), progress.step,
                         progress.slots / u.slots, u.plural));
}

// Any world size and ZeRO stage to any other: this rank reads its slice from the files that hold it.
void RunCheckpoints::restore_optimizer(const Checkpoint& ck, const TrainState& st) {
    const int rank = p_.dc.rank(), world = p_.dc.world();
    const optim::ArenaSlice mine = zero_shard(p_.arena_numel, p_.zero1 ? world : 1, rank);
    const auto index = read_optimizer_index(ck, st);
    const size_t read =
        p_.zero3 ? p_.zero3->restore_optimizer(ck, index) : restore_optimizer_state(*p_.opt, ck, index, mine);
    const int ck_world = st.world_size;
    if (ck_world != world || st.zero_stage != zero_stage())
        log_line(fmt::format("resume: optimizer state of {} rank{} at zero_stage {} resharded for {} rank{} at "
                             "zero_stage {} (rank {} read {} file{})",
                             ck_world, ck_world == 1 ? "" : "s", st.zero_stage, world, world == 1 ? "" : "s",
                             zero_stage(), rank, read, read == 1 ? "" : "s"));
    const int rows = p_.cfg.trainer.micro_batch_size * p_.cfg.trainer.grad_accum_steps;
    if (ck_world != world)
        log_line(fmt::format("resume: the checkpoint was trained by {} ranks, this run has {}: the global batch "
                             "changes from {} to {} rows",
                             ck_world, world, rows * ck_world, rows * world));
}

}  // namespace llmt::train
