// train/trainer.h: TrainingRun, one run's steps for any task (train/task.h).
#include "train/trainer.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <optional>
#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/rng.h"
#include "core/time.h"
#include "distributed/env.h"
#include "distributed/reducer.h"
#include "kernels/ops.h"
#include "models/hf_resolve.h"
#include "models/peft.h"
#include "models/registry.h"
#include "optim/grad_clip.h"
#include "optim/lr_schedule.h"
#include "optim/make_optimizer.h"
#include "tracking/tracker.h"
#include "train/batches.h"
#include "train/checkpoint.h"
#include "train/checkpoint_sync.h"
#include "train/console.h"
#include "train/cpu_precision.h"
#include "train/dist_context.h"
#include "train/metrics.h"
#include "train/mfu.h"
#include "train/model_setup.h"
#include "train/rank_memory.h"
#include "train/remote_inputs.h"
#include "train/resume.h"
#include "train/run_checkpoint.h"
#include "train/run_dir.h"
#include "train/run_plan.h"
#include "train/signals.h"
#include "train/task.h"
#include "train/zero3_state.h"

namespace llmt::train {

namespace {

// Log lines: stderr on rank 0 and logs/rank<k>.log on every rank (train/console.h).
void log_line(const std::string& s) { console().line(s); }

void apply_threads(const config::Config& cfg) { kernels::set_cpu_threads(cfg.run.threads); }

// How long the end of a run waits for its checkpoint uploads (each stalled request gives up sooner).
constexpr double kSyncFinishTimeoutS = 3600;


// One training run, as named steps: set up the device and ranks, build the model and data, then either a
// dry run or the optimizer, the run directory (new or resumed), and the loop of steps with evaluation,
// checkpoints and a graceful stop. run() is the order; each method is one step. What the run's workload
// reads, evaluates and reports is its Task's (train/task.h).
class TrainingRun {
public:
    explicit TrainingRun(const TrainOptions& opts) : opts_(opts), cfg_(opts.cfg), tc_(cfg_.trainer) {}

    TrainResult run() {
        set_up_ranks();
        check_memory_fits();
        build();
        open_data();
        // The length that will run, from trainer.max_steps or trainer.epochs (config/loader.h says which wins).
        log_line(tc_.epochs > 0 ? fmt::format("trainer: {} steps ({} epochs)", tc_.max_steps, tc_.epochs)
                                : fmt::format("trainer: {} steps (trainer.max_steps)", tc_.max_steps));
        if (opts_.dry_run) return dry_run();
        build_optimizer();
        open_run_dir();
        attach_grad_sync();
        if (rank_ == 0) ckpt_sync_ = CheckpointSync::start(cfg_, run_dir_->path(), run_dir_->run_id(), log_line);
        log_line(fmt::format("run: {} ({})", run_dir_->run_id(), run_dir_->path().string()));
        for (const auto& w : cfg_.warnings) log_line("config: warning: " + w);
        metrics_.emplace(cfg_.tracking.jsonl && rank_ == 0 ? run_dir_->metrics_path() : std::filesystem::path());
        tracker_.emplace(cfg_, run_dir_->path(), run_dir_->run_id(), rank_, step_);  // TensorBoard, MLflow
        metrics_->also_to([this](const nlohmann::ordered_json& r) { tracker_->log(r); });
        const int exit_code = train_loop();
        return finish(exit_code);
    }

private:
    // The device, the process group and how gradients are synchronised.
    void set_up_ranks() {
        install_stop_handlers();  // first: before any OpenMP thread exists (see signals.h)
        console().close_file();   // an earlier run of this process keeps none of this run's lines
        // A model directory's config.json fills the model keys the config left out (and must agree with
        // those it wrote) before anything is sized from them.
        fetch_remote_inputs(cfg_);  // s3:// init_from and shards into the local cache first
        init_from_ = models::prepare_init_from(cfg_);
        models::prepare_lora_init_from(cfg_);
        task_ = make_task(cfg_);
        best_ = task_->best_metric();
        // Config refusals before any rendezvous (the device is settled once the world size is known).
        check_supported(cfg_, cfg_.run.device == "cpu" || kernels::device_count(Device::kCuda) == 0 ? Device::kCpu
                                                                                                   : Device::kCuda);
        apply_threads(cfg_);
        // The device first: with NCCL, DistContext makes GPU LOCAL_RANK current before any CUDA work.
        dev_ = resolve_device(cfg_, opts_.dry_run ? 1 : dist::worker_env_from().local_world_size);
        dc_ = opts_.dry_run ? DistContext::single() : DistContext::create(cfg_, dev_);
        world_ = dc_.world();
        rank_ = dc_.rank();
        dtype_ = check_supported(cfg_, dev_);
        sync_ = grad_sync_plan(cfg_, dc_.active() ? world_ : 1);
        console().set_stderr(rank_ == 0);
        if (dc_.active())
            fmt::print(stderr, "dist: rank {} of {} (local {} of {}), {} via {}:{}{}{}, restart {}\n", rank_, world_,
                       dc_.env().local_rank, dc_.env().local_world_size, dc_.pg().backend(), dc_.env().master_addr,
                       dc_.env().master_port, dc_.env().use_agent_store ? " (the torchrun agent's store)" : "",
                       sync_.zero1 ? ", ZeRO-1" : sync_.zero3 ? ", ZeRO-3" : "", dc_.env().restart_count);
    }

    // Memory before any arena is allocated: a model that cannot fit is refused with its figures.
    void check_memory_fits() {
        mem_ = estimate_training_memory(cfg_, dev_, dtype_, sync_.zero1 ? world_ : 1, sync_.zero3 ? world_ : 1);
        check_memory(mem_, memory_limit(dev_, opts_.max_memory), cfg_);
    }

    void build() {
        // ZeRO-3: this rank's chunks only, drawn or read tensor by tensor by every rank.
        model_ = build_model(cfg_, init_from_, dev_, dtype_, {sync_.zero3 ? world_ : 1, sync_.zero3 ? rank_ : 0});
        // Every rank starts from rank 0's weights (the same seed gives the same init, but init_from files
        // could differ between hosts; under ZeRO-3 each rank reads its chunks from its own).
        if (dc_.active() && (!sync_.zero3 || model_->lora())) {  // ZeRO-3 shards the weights (not LoRA's adapters)
            dc_.pg().broadcast(Tensor(model_->params().data(), {static_cast<int64_t>(model_->params().nbytes() / 4)},
                                      DType::kF32, model_->device()),
                               0);
            model_->sync_compute_params();
        }
        log_line("model: " + model_->summary());
        if (const models::LoraAdapters* lora = model_->lora()) {
            lora_base_ = models::lora_base_identity(cfg_, init_from_.weights);
            log_line(
                fmt::format("lora: r {}, alpha {:g} (scale {:g}{}), {} modules adapted, {} trainable parameters "
                            "({:.3f}% of {}); base frozen",
                            lora->spec().r, lora->spec().alpha, lora->scale(), lora->spec().rslora ? ", rsLoRA" : "",
                            lora->modules().size(), lora->store().num_parameters(),
                            100.0 * static_cast<double>(lora->store().num_parameters()) /
                                static_cast<double>(model_->num_parameters()),
                            model_->num_parameters()));
        }
        choose_precision();
        if (dev_ != Device::kCuda) return log_cpu_precision();
        const auto mem = kernels::device_memory_info(dev_);
        log_line(
            fmt::format("device: cuda, {} compute; memory plan {:.2f} GiB (parameters {:.2f}, gradients {:.2f}, "
                        "optimizer state {:.2f}, activations {:.2f} at B={} T={}, recompute {}{}) of {:.1f} GiB on "
                        "the GPU",
                        dtype_name(dtype_), mem_.total() / 1073741824.0, mem_.parameters / 1073741824.0,
                        mem_.gradients / 1073741824.0, mem_.optimizer / 1073741824.0, mem_.activations / 1073741824.0,
                        B(), T(), tc_.recompute,
                        model_->trained().dtype() == DType::kBF16 && sync_.zero1
                            ? fmt::format("; fp32 masters sharded over {} ranks, {:.2f} GiB while building", world_,
                                          mem_.build_peak / 1073741824.0)
                            : std::string(),
                        mem.total / 1073741824.0));
    }

    // trainer.precision as this run takes it (auto: train/cpu_precision.h); rank 0 alone probes and every rank
    // runs its choice.
    void choose_precision() {
        if (rank_ == 0) precision_ = resolve_precision(cfg_, dev_);
        const std::string p = dc_.from_rank0("precision", rank_ == 0 ? precision_.precision : "");
        if (rank_ != 0) precision_ = precision_from_rank0(cfg_, p);
        for (const auto& l : precision_.log_lines()) log_line(l);
    }

    // trainer.precision on the CPU: the GEMMs' input precision (kernels/cpu/matmul.h), set before the first step.
    void log_cpu_precision() {
        const bool bf16 = precision_.precision == "bf16";
        const std::string how = kernels::set_cpu_gemm_precision(bf16 ? DType::kBF16 : DType::kF32);
        log_line(fmt::format("device: cpu, {} threads, {}", omp_get_max_threads(),
                             bf16 ? "bf16 GEMMs with fp32 accumulation (" + how + "), fp32 weights and activations"
                                  : std::string("fp32 GEMMs")));
    }

    // The task's training data (and the validation data it evaluates on).
    void open_data() {
        loader_ = task_->open_training_data(*model_, dc_, B());
        log_line("data: " + loader_->describe());
        if (tc_.epochs > 0) set_length_from_epochs();
    }

    // trainer.epochs becomes trainer.max_steps once the training data's size is known.
    void set_length_from_epochs() {
        const std::optional<int64_t> steps = task_->steps_for_epochs(world_);
        LLMT_INTERNAL_CHECK(steps.has_value(), "trainer.epochs {}: the task counts no epochs", tc_.epochs);
        cfg_.trainer.max_steps = *steps;
        if (tc_.warmup_steps > tc_.max_steps) {  // as the loader does for max_steps (config/schedule_keys.h)
            log_line(
                fmt::format("warning: trainer.warmup_steps ({}) is longer than the {} steps of trainer.epochs {}: "
                            "shortened to {}",
                            tc_.warmup_steps, tc_.max_steps, tc_.epochs, tc_.max_steps));
            cfg_.trainer.warmup_steps = tc_.max_steps;
        }
    }

    // One forward pass: the parameter count, the memory plan and the loss; no update.
    TrainResult dry_run() {
        std::vector<int32_t> x(static_cast<size_t>(B()) * T()), y(x.size()), pos(x.size());
        const MicroBatch mb = loader_->next(x.data(), y.data(), pos.data());
        Stopwatch sw;
        float loss = model_->forward(x.data(), y.data(), B(), mb.T, false, 1.f, mb.positions ? pos.data() : nullptr);
        nlohmann::ordered_json s = {{"dry_run", true},
                                    {"parameters", model_->num_parameters()},
                                    {"memory_bytes",
                                     {{"parameters", mem_.parameters},
                                      {"gradients", mem_.gradients},
                                      {"optimizer", mem_.optimizer},
                                      {"activations", mem_.activations},
                                      {"total", mem_.total()}}},
                                    {"recompute", tc_.recompute},
                                    {"loss", loss},
                                    {"forward_ms", sw.seconds() * 1e3},
                                    {"train_windows", loader_->num_rows()},
                                    {"steps", tc_.max_steps},
                                    {"device", std::string(device_name(dev_))},
                                    {"precision", std::string(dtype_ == DType::kBF16 ? "bf16" : "fp32")}};
        if (dev_ == Device::kCuda) {
            const auto mem = kernels::device_memory_info(dev_);
            s["gpu_memory_bytes"] = {{"used_after_forward", mem.total - mem.free}, {"total", mem.total}};
        }
        return {0, s};
    }

    void build_optimizer() {
        arena_numel_ = model_->trained().arena_numel();
        // ZeRO-1: rank r keeps the optimizer state of its shard of the arena only (dist_context.h), and under
        // bf16 the fp32 masters of that shard only (the bf16 compute copy holds every weight), released
        // before the optimizer state is allocated.
        const optim::ArenaSlice slice = zero_shard(arena_numel_, sync_.zero1 ? world_ : 1, rank_);
        if (sync_.zero1 && model_->trained().dtype() == DType::kBF16)
            model_->trained().shard_masters(slice.begin, slice.end);
        const auto slots = param_slots(*model_, tc_.decay_embeddings);
        auto make = [&](optim::ArenaSlice s) { return optim::make_optimizer(tc_, slots, arena_numel_, s, dev_); };
        // ZeRO-3: one optimizer per unit over this rank's chunk of it (zero3_state.h); under LoRA the frozen
        // base's units are gathered and the adapters trained whole (all-reduced by the Reducer).
        if (sync_.zero3 && !model_->lora()) {
            zero3_ = std::make_unique<Zero3State>(dc_, *model_, make);
        } else {
            opt_ = make(slice);
        }
        if (sync_.zero3 && model_->lora()) {
            base_gather_ = std::make_unique<Zero3Gather>(dc_, model_->base());
            model_->set_unit_gather(base_gather_.get());
        }
        sched_ = optim::make_lr_schedule(tc_);
    }

    // Run directory: new, or the one being resumed. Rank 0 decides (and alone creates files); the others
    // learn the directory and the checkpoint through the store and read the checkpoint too (the run
    // directory is on a filesystem every rank sees: one host, or a shared volume in pods).
    void open_run_dir() {
        RunMeta meta{opts_.argv, world_, std::string(device_name(dev_)), precision_.to_json()};
        std::string ckpt_path;
        if (rank_ == 0) ckpt_path = choose_run_dir(meta);
        const std::string run_path = dc_.from_rank0("run_dir", rank_ == 0 ? run_dir_->path().string() : "");
        ckpt_path = dc_.from_rank0("checkpoint", ckpt_path);
        if (rank_ != 0) run_dir_ = RunDir::open(run_path);
        console().open_file(run_dir_->logs_dir(), rank_);
        checkpoints_.emplace(CheckpointedParts{cfg_, *model_, opt_.get(), zero3_.get(), *loader_, *task_, dc_,
                                               sync_.zero1, sync_.zero3 ? 3 : sync_.zero1 ? 1 : 0, arena_numel_,
                                               lora_base_});
        if (!ckpt_path.empty()) restore(ckpt_path);
    }

    // Rank 0: creates or opens the run directory; returns the checkpoint to resume from ("" for none).
    std::string choose_run_dir(const RunMeta& meta) {
        if (opts_.resume.empty()) {
            run_dir_ = RunDir::create(cfg_, meta);
            return "";
        }
        ResumeTarget target = resolve_resume(opts_.resume, cfg_);
        if (target.checkpoint) {
            run_dir_ = RunDir::open(target.run_dir);
            return target.checkpoint->string();
        }
        // --resume auto and the run has no checkpoint yet: start it (reusing a directory a crash left).
        std::error_code ec;
        if (std::filesystem::is_directory(target.run_dir, ec) &&
            std::filesystem::exists(target.run_dir / "config.yaml", ec)) {
            run_dir_ = RunDir::open(target.run_dir);
            truncate_metrics_after(run_dir_->metrics_path(), 0);
        } else {
            run_dir_ = RunDir::create(cfg_, meta);
        }
        log_line(fmt::format("resume auto: no checkpoint in '{}', starting the run", target.run_dir.string()));
        return "";
    }

    // Weights, optimizer state, data position and progress from a checkpoint of this run's model and data.
    void restore(const std::string& ckpt_path) {
        RunProgress p = progress();
        checkpoints_->restore(ckpt_path, p);
        set_progress(p);
        if (rank_ == 0) truncate_metrics_after(run_dir_->metrics_path(), step_);
    }

    // Data parallelism: the Reducer all-reduces gradient buckets while backward runs (DDP); under ZeRO-1
    // gradients are reduce-scattered after the accumulation window instead, each rank updates its shard
    // and the parameters are all-gathered.
    void attach_grad_sync() {
        if (sync_.bucket_bytes == 0) return;
        reducer_ = std::make_unique<dist::Reducer>(dc_.pg(), model_->grads().data(), model_->grads().nbytes(),
                                                   sync_.bucket_bytes, sync_.overlap, model_->device());
        model_->set_grads_ready_hook([this](size_t offset) { reducer_->grads_ready_from(offset); });
    }

    // Every rank calls save() at the same steps (train/run_checkpoint.h); the directory on rank 0.
    std::filesystem::path save(bool mark_best) {
        last_saved_step_ = step_;
        SaveOptions so;
        so.keep_last = tc_.keep_last;
        so.mark_best = mark_best;
        auto dir = checkpoints_->save(run_dir_->checkpoints_dir(), progress(), so);
        if (ckpt_sync_) ckpt_sync_->checkpoint_saved(dir);  // uploaded in the background (output.sync)
        return dir;
    }

    RunProgress progress() const { return {step_, slots_, prior_wall_, best_loss_, best_}; }
    void set_progress(const RunProgress& p) {
        step_ = p.step;
        slots_ = p.slots;
        prior_wall_ = p.prior_wall;
        best_loss_ = p.best_loss;
        best_ = p.best;
    }

    // The task's evaluation on every rank; an improvement of its best metric keeps checkpoints/best.
    void run_eval() {
        if (!task_->evaluates()) return;
        Stopwatch sw;
        const Evaluation ev = task_->evaluate(*model_, dc_, B(), tc_.eval_steps);
        last_val_ = ev.loss;
        last_eval_step_ = step_;
        best_loss_.offer(ev.loss);
        const bool best = best_.offer(ev.score);
        nlohmann::ordered_json record = {{"step", step_}};
        record.update(ev.fields);
        record[best_.key()] = best_.to_json();
        record["eval_ms"] = sw.seconds() * 1e3;
        metrics_->write(record);
        log_line(fmt::format("eval step {}: {}{}", step_, ev.text, best ? ", best so far" : ""));
        if (best && step_ > 0) {
            auto dir = save(true);
            log_line(fmt::format("checkpoint: {} (best)", dir.string()));
        }
    }

    // One optimizer step: the micro-steps' forward/backward (gradients synchronised as configured),
    // the global norm, clipping and the optimizer. Returns the gradient norm; loss_sum gets the micro-steps' losses.
    double optimizer_step(double& loss_sum) {
        const int accum = tc_.grad_accum_steps;
        models::ParamStore& store = model_->trained();
        float* grads = static_cast<float*>(model_->grads().data());
        model_->zero_grad();
        loss_sum = 0;
        rank_step_slots_ = 0;
        // The step's loss is the mean over its targets on every rank: a micro-batch's mean weighs
        // W * targets / n (the Reducer divides by W). Windows weigh 1/accum each (n = 0: all equal).
        const int64_t n = loader_->global_targets_ahead(accum);
        for (int m = 0; m < accum; ++m) {
            const MicroBatch mb = loader_->next(x_.data(), y_.data(), pos_.data());
            rank_step_slots_ += static_cast<int64_t>(B()) * mb.T;
            // One dropout seed per (seed, rank, step, micro-step): resume reproduces the masks.
            model_->set_dropout_seed(splitmix64(splitmix64(static_cast<uint64_t>(cfg_.run.seed) ^ 0x64726f70ULL) +
                                                (static_cast<uint64_t>(rank_) << 48) +
                                                static_cast<uint64_t>(step_) * 4096 + static_cast<uint64_t>(m)));
            const bool uniform = n == 0;
            // Every rank runs every micro-step (the Reducer's all-reduce waits for all); training rows always hold
            // a target (the chat loader drops examples without one), so a micro-batch never lacks one.
            LLMT_INTERNAL_CHECK(uniform || mb.targets > 0, "step {}: a training micro-batch without targets",
                                step_ + 1);
            const float scale = uniform ? 1.0f / static_cast<float>(accum)
                                        : static_cast<float>(static_cast<double>(world_) *
                                                             static_cast<double>(mb.targets) / static_cast<double>(n));
            const float loss = model_->forward(x_.data(), y_.data(), B(), mb.T, /*train=*/true, scale,
                                               mb.positions ? pos_.data() : nullptr);
            loss_sum +=
                uniform ? loss : loss * static_cast<double>(mb.targets) * world_ / static_cast<double>(n) * accum;
            if (reducer_) reducer_->begin_backward(/*sync=*/m == accum - 1);  // no_sync until the last micro-step
            model_->backward();
            if (reducer_) reducer_->finish();
        }
        // ZeRO-1 (DistContext: staging on the model's device): grads[slice] = mean over ranks, returns the
        // global sum of squares. ZeRO-3: the chunks were reduced as each unit's backward ended.
        const double sumsq = sync_.zero1   ? dc_.zero_reduce_grads(grads, arena_numel_)
                             : zero3_      ? zero3_->grad_sum_squares()
                                           : optim::grad_sum_squares(grads, arena_numel_, dev_);
        const double norm = optim::global_norm_from_sumsq(sumsq);
        if (!std::isfinite(norm))
            throw Error(fmt::format("step {}: the gradient norm is {} (loss {}); stopping before the weights are "
                                    "corrupted (hint: lower trainer.lr)",
                                    step_ + 1, norm, loss_sum / accum));
        const float coef = optim::clip_coefficient(norm, tc_.max_grad_norm);
        lr_ = sched_.at(step_);
        if (zero3_) {
            zero3_->step(static_cast<float>(lr_), coef);
            return norm;
        }
        // Sharded masters: the optimizer updates this rank's fp32 shard and its slice of the bf16 copy.
        opt_->step(store.masters(), grads, static_cast<float>(lr_), coef, store.compute_params(),
                   store.masters_sharded() ? optim::Optimizer::ParamsAt::kSlice : optim::Optimizer::ParamsAt::kArena);
        // ZeRO-1: every rank's updated slice to every rank: the bf16 compute copy when there is one (the
        // fp32 masters stay sharded), else the fp32 weights.
        if (sync_.zero1) dc_.zero_gather_params(store.masters(), arena_numel_, store.compute_params());
        return norm;
    }

    // Throughput in the task's unit (tokens/s, images/s) is the job's; MFU is per rank (one rank's rate against
    // one device's peak); memory is each rank's (rank_memory.h), the largest in the metrics and the log.
    void log_step(double norm, double dt) {
        const CountUnit u = task_->unit();
        const double rate = static_cast<double>(step_slots_) / dt / static_cast<double>(u.slots);
        const double rate_rank = rate / world_;
        const double mfu = mfu_meter_->fraction(flops_per_unit_ * rate_rank);
        if (auto note = mfu_meter_->raised()) log_line(*note);
        const std::vector<double> mem = memory_per_rank_mib();
        const double mem_max = *std::max_element(mem.begin(), mem.end());
        metrics_->write({{"step", step_}, {"loss", last_loss_}, {"lr", lr_}, {"grad_norm", norm}, {"ms", dt * 1e3},
                         {u.plural + "_per_sec", rate}, {u.plural + "_per_sec_per_rank", rate_rank}, {"mfu", mfu},
                         {u.plural, slots_ / u.slots}, {"memory_mib_max", mem_max}});
        const double eta = (tc_.max_steps - step_) * (train_time_ / static_cast<double>(steps_this_run_));
        std::string rates = fmt::format("{:.0f} {}", rate, u.rate);
        if (world_ > 1) rates += fmt::format(" ({:.0f}/rank)", rate_rank);
        log_line(
            fmt::format("step {:>6}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.0f} ms | {} | mfu {:.1f}%{} | "
                        "mem {:.0f} MiB{} | eta {:.0f}s",
                        step_, tc_.max_steps, last_loss_, lr_, norm, dt * 1e3, rates, 100 * mfu,
                        world_ > 1 ? "/rank" : "", mem_max, world_ > 1 ? " max/rank" : "", eta));
    }

    // Each rank's memory (rank_memory.h) in whole MiB, on every rank (one all-reduce: exact in f32).
    std::vector<double> memory_per_rank_mib() {
        std::vector<double> mem(static_cast<size_t>(world_), 0.0);
        mem[static_cast<size_t>(rank_)] = std::round(static_cast<double>(rank_memory_bytes(dev_)) / 1048576.0);
        dc_.sum(mem);
        return mem;
    }

    // A resumed run whose checkpoint is at trainer.max_steps already: say so, and what happens instead.
    void log_already_complete() const {
        const bool evaluates = task_->evaluates() && tc_.eval_every_steps > 0 && last_eval_step_ != step_;
        log_line(fmt::format(
            "resume: run {} was already complete (step {} of trainer.max_steps {}): nothing to train; "
            "{}rewriting summary.json (raise trainer.max_steps to train further)",
            run_dir_->run_id(), step_, tc_.max_steps, evaluates ? "evaluating the final weights and " : ""));
    }

    // Steps until max_steps, --stop-at-step or a signal; returns the exit code.
    int train_loop() {
        const CountUnit u = task_->unit();
        flops_per_unit_ = model_->train_flops_per_token(T()) * static_cast<double>(u.slots);
        mfu_meter_.emplace(mfu_peak(dev_, precision_.precision == "bf16"));
        log_line(fmt::format("mfu: model FLOPs per {} ({:.3g}) x {}/s{}, against {}", u.singular, flops_per_unit_,
                             u.plural, world_ > 1 ? " of one rank" : "", mfu_meter_->peak().what));
        x_.resize(static_cast<size_t>(B()) * T());
        y_.resize(x_.size());
        pos_.resize(x_.size());
        if (step_ >= tc_.max_steps) {
            log_already_complete();
            return 0;
        }
        console().enable_progress(opts_.progress);
        run_clock_.reset();
        const int64_t full_step_slots = static_cast<int64_t>(B()) * T() * tc_.grad_accum_steps * world_;
        while (step_ < tc_.max_steps) {
            Stopwatch sw;
            double loss_sum = 0;
            const double norm = optimizer_step(loss_sum);
            ++step_;
            ++steps_this_run_;
            // Slots processed by all ranks: fixed for windows and images; chat rows' widths vary per rank and step.
            step_slots_ = loader_->fixed_width() ? full_step_slots
                                                 : static_cast<int64_t>(std::llround(
                                                       dc_.mean(static_cast<double>(rank_step_slots_)) * world_));
            slots_ += step_slots_;
            slots_this_run_ += step_slots_;
            if (dev_ == Device::kCuda && steps_this_run_ == 1) {
                const auto mem = kernels::device_memory_info(dev_);
                log_line(fmt::format("device: {:.2f} GiB of GPU memory in use after the first step (of {:.1f} GiB)",
                                     (mem.total - mem.free) / 1073741824.0, mem.total / 1073741824.0));
            }
            const double dt = sw.seconds();
            train_time_ += dt;
            last_loss_ = dc_.mean(loss_sum / tc_.grad_accum_steps);
            if (step_ % tc_.log_every_steps == 0 || step_ == 1 || step_ == tc_.max_steps) log_step(norm, dt);
            console().progress({step_, tc_.max_steps, last_loss_, train_time_ / static_cast<double>(steps_this_run_)});
            if (const int code = after_step(); code >= 0) return code;
        }
        return 0;
    }

    // Evaluation, checkpoints and stopping after a step: -1 to go on, else the exit code.
    int after_step() {
        // A signal reaches the ranks at slightly different times: they agree to stop at the same step.
        const bool stop = dc_.mean(stop_signal() != 0 ? 1.0 : 0.0) > 0;
        if (tc_.eval_every_steps > 0 && step_ % tc_.eval_every_steps == 0 && !stop) run_eval();
        const bool at_end = step_ == tc_.max_steps || step_ == opts_.stop_at_step;
        const bool due = (tc_.save_every_steps > 0 && step_ % tc_.save_every_steps == 0) || at_end || stop;
        if (due && last_saved_step_ != step_) {
            prior_wall_ += run_clock_.seconds();
            run_clock_.reset();
            auto dir = save(false);
            log_line(fmt::format("checkpoint: {}", dir.string()));
        }
        if (step_ == opts_.stop_at_step && step_ < tc_.max_steps) {
            log_line(fmt::format("stopping at step {} as asked (--stop-at-step); resume with --resume {}", step_,
                                 run_dir_->run_id()));
            return 0;
        }
        if (stop) {
            const int sig = stop_signal() != 0 ? stop_signal() : SIGTERM;  // a peer's signal stops us too
            log_line(fmt::format("stopping on signal {} after step {}; resume with --resume {}", sig, step_,
                                 run_dir_->run_id()));
            return 128 + sig;
        }
        return -1;
    }

    TrainResult finish(int exit_code) {
        console().end_progress();
        if (exit_code == 0 && task_->evaluates() && tc_.eval_every_steps > 0 && last_eval_step_ != step_) run_eval();
        prior_wall_ += run_clock_.seconds();
        nlohmann::ordered_json summary = run_summary(exit_code);
        if (exit_code == 0) add_final_report(summary);
        if (rank_ == 0) write_file_atomic(run_dir_->summary_path(), summary.dump(2) + "\n");
        dc_.barrier();  // rank 0 serves the store: nobody leaves while a peer may still talk to it
        tracker_->finish(exit_code);  // after the barrier: peers never wait on a tracking server
        if (ckpt_sync_) ckpt_sync_->finish(kSyncFinishTimeoutS);  // likewise for object storage
        return {exit_code, summary};
    }

    // summary.json's fields of any run: losses, the task's best metric, counts and throughput in the task's
    // unit, memory, and how the run ended.
    nlohmann::ordered_json run_summary(int exit_code) {
        const CountUnit u = task_->unit();
        const double rate = train_time_ > 0 ? static_cast<double>(slots_this_run_ / u.slots) / train_time_ : 0.0;
        auto opt_num = [](double v) {
            return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json();
        };
        nlohmann::ordered_json summary = {
            {"run_id", run_dir_->run_id()},
            {"final_train_loss", opt_num(last_loss_)},
            {"final_val_loss", opt_num(last_val_)},
            {"best_val_loss", best_loss_.to_json()},
            {"steps", step_},
            {u.plural, slots_ / u.slots},
            {"wall_s", prior_wall_},
            {u.plural + "_per_sec", rate},
            {u.plural + "_per_sec_per_rank", rate / world_},
            {"memory_mib_per_rank", memory_per_rank_mib()},
            {"memory_measure", rank_memory_what(dev_)},
            {"memory_plan_bytes", {{"parameters", mem_.parameters}, {"gradients", mem_.gradients},
                                   {"optimizer", mem_.optimizer}, {"activations", mem_.activations},
                                   {"total", mem_.total()}}},
            {"interrupted", exit_code != 0},
            {"device", std::string(device_name(dev_))},
            {"world_size", world_}};
        if (best_.value()) summary[best_.key()] = *best_.value();  // best_val_loss already, for the loss itself
        return summary;
    }

    // What the task adds at the end of a completed run (a classifier's test set) to the summary, the metrics
    // and the log.
    void add_final_report(nlohmann::ordered_json& summary) {
        const FinalReport r = task_->final_report(*model_, dc_, B());
        if (!r.log.empty()) log_line(r.log);
        summary.update(r.summary);
        if (!r.metrics.empty()) {
            nlohmann::ordered_json record = {{"step", step_}};
            record.update(r.metrics);
            metrics_->write(record);
        }
    }

    int B() const { return tc_.micro_batch_size; }
    int T() const { return task_->row_width(); }

    const TrainOptions& opts_;
    config::Config cfg_;  // with model.init_from's config.json applied
    const config::TrainerConfig& tc_;
    models::HfSource init_from_;
    Device dev_ = Device::kCpu;
    DType dtype_ = DType::kF32;
    DistContext dc_ = DistContext::single();
    int world_ = 1, rank_ = 0;
    GradSync sync_;
    PrecisionChoice precision_;
    MemoryEstimate mem_;
    std::unique_ptr<Task> task_;  // the workload: language modelling or image classification
    std::unique_ptr<models::Model> model_;
    std::unique_ptr<TrainBatches> loader_;
    std::unique_ptr<optim::Optimizer> opt_;  // trainer.optimizer: optim::AdamW or optim::Sgd (not under ZeRO-3)
    std::unique_ptr<Zero3State> zero3_;      // ZeRO-3: the per-unit gathers and optimizers
    std::unique_ptr<Zero3Gather> base_gather_;  // ZeRO-3 under LoRA: the frozen base's per-unit gathers
    optim::LrSchedule sched_{};
    size_t arena_numel_ = 0;
    std::optional<RunDir> run_dir_;
    std::optional<RunCheckpoints> checkpoints_;
    std::optional<MetricsLog> metrics_;
    std::optional<tracking::Tracker> tracker_;  // fed by metrics_: declared after it, destroyed before it
    std::unique_ptr<CheckpointSync> ckpt_sync_;  // rank 0 with output.sync
    std::unique_ptr<dist::Reducer> reducer_;
    std::optional<MfuMeter> mfu_meter_;
    double flops_per_unit_ = 0;  // training FLOPs of one unit of the task's throughput (a token, an image)
    std::vector<int32_t> x_, y_, pos_;
    // Batch slots (B x T per micro-batch; tokens, or a classifier's pixels): this rank's in the current
    // step, all ranks' in the last step and in this process's part of the run.
    int64_t rank_step_slots_ = 0, step_slots_ = 0, slots_this_run_ = 0;
    nlohmann::json lora_base_;  // the frozen base's identity (models/peft.h), LoRA runs only
    // Progress, restored on resume: slots_ is state.json's "tokens".
    int64_t step_ = 0, slots_ = 0;
    BestMetric best_loss_{"val_loss", /*higher_is_better=*/false};  // summary.json's best_val_loss
    BestMetric best_{"val_loss", /*higher_is_better=*/false};       // the task's, which keeps checkpoints/best
    double prior_wall_ = 0;
    // This process's part of the run.
    int64_t last_saved_step_ = -1, last_eval_step_ = -1, steps_this_run_ = 0;
    double last_loss_ = std::nan(""), last_val_ = std::nan(""), lr_ = 0, train_time_ = 0;
    Stopwatch run_clock_;
};

}  // namespace

TrainResult run_training(const TrainOptions& opts) { return TrainingRun(opts).run(); }

}  // namespace llmt::train
