#include "train/trainer.h"

#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/rng.h"
#include "core/safetensors_integrity.h"
#include "core/time.h"
#include "data/loader.h"
#include "data/prepare_cache.h"
#include "dist/env.h"
#include "dist/reducer.h"
#include "kernels/ops.h"
#include "models/gpt2.h"
#include "models/gpt2_io.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "optim/lr_schedule.h"
#include "tracking/tracker.h"
#include "train/checkpoint.h"
#include "train/dist_context.h"
#include "train/metrics.h"
#include "train/mfu.h"
#include "train/resume.h"
#include "train/run_dir.h"
#include "train/run_plan.h"
#include "train/signals.h"
#include "train/train_state.h"

namespace llmt::train {

namespace {

// Log lines go to stderr (rank 0 only, so a launcher's merged output shows one copy) and, once the run
// directory exists, to logs/rank<k>.log (every rank).
struct RankLog {
    bool to_stderr = true;
    std::FILE* file = nullptr;
    ~RankLog() {
        if (file) std::fclose(file);
    }
};
RankLog& rank_log() {
    static RankLog log;
    return log;
}

void log_line(const std::string& s) {
    RankLog& log = rank_log();
    if (log.to_stderr) fmt::print(stderr, "{}\n", s);
    if (log.file) {
        fmt::print(log.file, "{} {}\n", utc_iso8601_now(), s);
        std::fflush(log.file);
    }
}

void open_rank_log(const std::filesystem::path& logs_dir, int rank) {
    RankLog& log = rank_log();
    if (log.file) std::fclose(log.file);
    std::error_code ec;
    std::filesystem::create_directories(logs_dir, ec);
    const auto path = logs_dir / fmt::format("rank{}.log", rank);
    log.file = std::fopen(path.c_str(), "a");
    if (!log.file) throw IoError(fmt::format("cannot open '{}' for appending: {}", path.string(), std::strerror(errno)));
}

// ZeRO-1 optimizer shard of one rank inside a checkpoint directory.
std::string zero_optimizer_file(int rank) { return fmt::format("optimizer.rank{}.safetensors", rank); }

void apply_threads(const config::Config& cfg) {
    if (cfg.run.threads > 0) omp_set_num_threads(cfg.run.threads);
}

// A host arena with `a`'s layout (the staging buffer for checkpoints of device parameters).
Arena host_copy(const Arena& a) {
    Arena h;
    for (const auto& e : a.entries()) h.add(e.name, std::vector<int64_t>(e.shape), e.dtype);
    h.allocate(false);
    kernels::copy(Tensor(h.data(), {static_cast<int64_t>(h.nbytes() / 4)}),
                  Tensor(a.data(), {static_cast<int64_t>(a.nbytes() / 4)}, DType::kF32, a.device()));
    return h;
}

// HF-layout weights into the model's parameters on any device (staged through host memory for a GPU).
void load_params(models::Gpt2& model, const SafetensorsFile& file) {
    if (model.device() == Device::kCpu) {
        models::gpt2_load_hf(model, model.params(), file);
        return;
    }
    Arena host = host_copy(model.params());
    models::gpt2_load_hf(model, host, file);
    kernels::copy(Tensor(model.params().data(), {static_cast<int64_t>(host.nbytes() / 4)}, DType::kF32, model.device()),
                  Tensor(host.data(), {static_cast<int64_t>(host.nbytes() / 4)}));
    model.sync_compute_params();
}

// The train and val shard lists for the configured source (preparing text/jsonl into the cache).
struct DataFiles {
    std::vector<std::string> train, val;
    data::ShardFormat format = data::ShardFormat::kLlmc;
};

DataFiles resolve_data(const config::Config& cfg, bool need_train) {
    DataFiles f;
    f.format = cfg.data.shard_format == "nanogpt" ? data::ShardFormat::kNanoGptU16 : data::ShardFormat::kLlmc;
    if (cfg.data.source == "shards") {
        f.train = expand_glob(cfg.data.train_shards);
        if (!cfg.data.val_shards.empty()) f.val = expand_glob(cfg.data.val_shards);
        if (need_train && f.train.empty())
            throw InputError(fmt::format("data.train_shards: no file matches '{}' (run `make data`, or `llmtrain data "
                                         "prepare`, to create shards)",
                                         cfg.data.train_shards));
        return f;
    }
    data::PrepareOptions po;
    po.inputs = cfg.data.paths;
    po.corpus.format = cfg.data.source == "jsonl" ? data::InputFormat::kJsonl : data::InputFormat::kText;
    po.corpus.text_field = cfg.data.text_field;
    po.tokenizer = cfg.data.tokenizer;
    po.val_fraction = cfg.data.val_fraction;
    po.seed = cfg.run.seed;
    auto cached = data::prepare_cached(po, cfg.data.cache_dir);
    log_line(fmt::format("data: {} shards in {}", cached.reused ? "reusing" : "prepared", cached.dir.string()));
    f.train = expand_glob((cached.dir / "train_*.bin").string());
    f.val = expand_glob((cached.dir / "val_*.bin").string());
    return f;
}

// model.init_from's file, its checksums (when it has them: files from elsewhere have none) and the
// finiteness of every weight checked before it is used.
SafetensorsFile open_init_from(const std::filesystem::path& path) {
    SafetensorsFile file = SafetensorsFile::open(path);
    verify_tensors(file, Checksums::kIfPresent);
    return file;
}

models::Gpt2 build_model(const config::Config& cfg, Device device, DType dtype) {
    models::Gpt2 model(model_config(cfg), device, dtype);
    if (cfg.model.init_from == "scratch") {
        model.init_random(cfg.run.seed);
    } else {
        auto path = models::gpt2_resolve_init_from(cfg.model.init_from);
        load_params(model, open_init_from(path));
        log_line(fmt::format("model: initialised from {}", path.string()));
    }
    return model;
}

std::vector<optim::ParamSlot> param_slots(const models::Gpt2& model, bool decay_embeddings) {
    std::vector<optim::ParamSlot> slots;
    const auto& specs = model.param_specs();
    for (size_t i = 0; i < specs.size(); ++i) {
        const auto& e = model.params().entry(i);
        bool decay = specs[i].kind == models::ParamKind::kWeight ||
                     (decay_embeddings && specs[i].kind == models::ParamKind::kEmbedding);
        slots.push_back({specs[i].name, Shape(specs[i].shape.begin(), specs[i].shape.end()), e.offset / sizeof(float),
                         decay});
    }
    return slots;
}

// Mean validation loss over `steps` eval batches (all positions), as `llmtrain eval` reports it.
struct EvalOutput {
    double loss = 0;
    int64_t tokens = 0;
    int64_t batches = 0;
};

EvalOutput evaluate(models::Gpt2& model, const data::EvalLoader& loader, int B, int T, int64_t steps) {
    EvalOutput out;
    int64_t n = std::min<int64_t>(steps, static_cast<int64_t>(loader.num_batches()));
    std::vector<int32_t> x(static_cast<size_t>(B) * T), y(x.size());
    double sum = 0;
    for (int64_t b = 0; b < n; ++b) {
        loader.batch(static_cast<size_t>(b), x.data(), y.data());
        sum += model.forward(x.data(), y.data(), B, T, /*train=*/false);
    }
    out.batches = n;
    out.tokens = n * B * T;
    out.loss = n ? sum / static_cast<double>(n) : std::nan("");
    return out;
}

bool stderr_is_tty() { return ::isatty(2) == 1; }

}  // namespace

TrainResult run_training(const TrainOptions& opts) {
    const config::Config& cfg = opts.cfg;
    install_stop_handlers();  // first: before any OpenMP thread exists (see signals.h)
    // Config refusals before any rendezvous (the device is settled once the world size is known).
    check_supported(cfg, cfg.run.device == "cpu" || kernels::device_count(Device::kCuda) == 0 ? Device::kCpu
                                                                                              : Device::kCuda);
    apply_threads(cfg);
    const auto& tc = cfg.trainer;
    const int B = tc.micro_batch_size, T = cfg.model.block_size, accum = tc.grad_accum_steps;
    // The device first: with NCCL, DistContext makes GPU LOCAL_RANK current before any CUDA work.
    const Device dev = resolve_device(cfg, opts.dry_run ? 1 : dist::worker_env_from().local_world_size);
    DistContext dc = opts.dry_run ? DistContext::single() : DistContext::create(cfg, dev);
    const int world = dc.world(), rank = dc.rank();
    const DType dtype = check_supported(cfg, dev);
    const std::string device(device_name(dev));
    const GradSync sync = grad_sync_plan(cfg, dc.active() ? world : 1);
    const bool zero = sync.zero1;
    rank_log().to_stderr = rank == 0;
    if (dc.active())
        fmt::print(stderr, "dist: rank {} of {} (local {} of {}), {} via {}:{}{}, restart {}\n", rank, world,
                   dc.env().local_rank, dc.env().local_world_size, dc.pg().backend(), dc.env().master_addr,
                   dc.env().master_port, zero ? ", ZeRO-1" : "", dc.env().restart_count);

    // Memory before any arena is allocated: a model that cannot fit is refused with its figures.
    const MemoryEstimate mem_est = estimate_training_memory(cfg, dev, dtype, zero ? world : 1);
    check_memory(mem_est, memory_limit(dev, opts.max_memory), cfg);

    models::Gpt2 model = build_model(cfg, dev, dtype);
    const auto& mc = model.config();
    // Every rank starts from rank 0's weights (the same seed gives the same init, but init_from files
    // could differ between hosts).
    if (dc.active()) {
        dc.pg().broadcast(Tensor(model.params().data(), {static_cast<int64_t>(model.params().nbytes() / 4)},
                                 DType::kF32, model.device()),
                          0);
        model.sync_compute_params();
    }
    log_line(fmt::format("model: gpt2, {} layers, d_model {}, {} heads, block {}, vocab {} (padded {}), {:.2f}M parameters",
                         mc.n_layer, mc.d_model, mc.n_head, mc.block_size, mc.vocab_size, mc.padded_vocab,
                         static_cast<double>(model.num_parameters()) / 1e6));
    const std::uint64_t opt_bytes = mem_est.optimizer, plan_total = mem_est.total();
    if (dev == Device::kCuda) {
        const auto mem = kernels::device_memory_info(dev);
        log_line(fmt::format("device: cuda, {} compute; memory plan {:.2f} GiB (parameters {:.2f}, gradients {:.2f}, "
                             "AdamW state {:.2f}, activations {:.2f} at B={} T={}, recompute {}) of {:.1f} GiB on the "
                             "GPU",
                             dtype_name(dtype), plan_total / 1073741824.0, mem_est.parameters / 1073741824.0,
                             mem_est.gradients / 1073741824.0, opt_bytes / 1073741824.0, mem_est.activations / 1073741824.0, B,
                             T, tc.recompute, mem.total / 1073741824.0));
    }

    DataFiles files = resolve_data(cfg, true);
    data::LoaderOptions lo;
    lo.shard_paths = files.train;
    lo.B = B;
    lo.T = T;
    lo.rank = rank;
    lo.world = world;
    lo.seed = cfg.run.seed;
    lo.shuffle = cfg.data.shuffle;
    lo.vocab_size = static_cast<size_t>(cfg.model.vocab_size);
    lo.format = files.format;
    data::DataLoader loader(lo);
    std::optional<data::EvalLoader> eval_loader;
    if (!files.val.empty()) {
        data::EvalLoaderOptions eo;
        eo.shard_paths = files.val;
        eo.B = B;
        eo.T = T;
        eo.rank = rank;
        eo.world = world;
        eo.vocab_size = lo.vocab_size;
        eo.format = files.format;
        eval_loader.emplace(eo);
    }

    if (opts.dry_run) {
        std::vector<int32_t> x(static_cast<size_t>(B) * T), y(x.size());
        loader.next(x.data(), y.data());
        Stopwatch sw;
        float loss = model.forward(x.data(), y.data(), B, T, false);
        nlohmann::ordered_json s = {
            {"dry_run", true},
            {"parameters", model.num_parameters()},
            {"memory_bytes", {{"parameters", mem_est.parameters}, {"gradients", mem_est.gradients}, {"optimizer", opt_bytes},
                              {"activations", mem_est.activations},
                              {"total", plan_total}}},
            {"recompute", tc.recompute},
            {"loss", loss},
            {"forward_ms", sw.seconds() * 1e3},
            {"train_windows", loader.num_windows()},
            {"device", device},
            {"precision", std::string(dtype == DType::kBF16 ? "bf16" : "fp32")}};
        if (dev == Device::kCuda) {
            const auto mem = kernels::device_memory_info(dev);
            s["gpu_memory_bytes"] = {{"used_after_forward", mem.total - mem.free}, {"total", mem.total}};
        }
        return {0, s};
    }

    optim::AdamWConfig ac;
    ac.beta1 = static_cast<float>(tc.betas[0]);
    ac.beta2 = static_cast<float>(tc.betas[1]);
    ac.eps = static_cast<float>(tc.eps);
    ac.weight_decay = static_cast<float>(tc.weight_decay);
    const size_t arena_numel = model.params().nbytes() / sizeof(float);
    // ZeRO-1: rank r keeps the AdamW state of arena elements [r*shard, (r+1)*shard) only.
    const size_t shard = zero ? (arena_numel + world - 1) / static_cast<size_t>(world) : arena_numel;
    optim::ArenaSlice slice;
    if (zero) slice = {static_cast<size_t>(rank) * shard, std::min(arena_numel, static_cast<size_t>(rank + 1) * shard)};
    optim::AdamW opt(param_slots(model, tc.decay_embeddings), arena_numel, ac, slice, dev);
    optim::LrSchedule sched{optim::parse_schedule_kind(tc.schedule), tc.lr, tc.min_lr, tc.warmup_steps, tc.max_steps};
    sched.validate();

    // Run directory: new, or the one being resumed. Rank 0 decides (and alone creates files); the
    // others learn the directory and the checkpoint through the store and read the checkpoint too
    // (the run directory is on a filesystem every rank sees: one host, or a shared volume in pods).
    std::optional<RunDir> run_dir;
    int64_t step = 0, tokens = 0;
    double best_val = std::numeric_limits<double>::infinity();
    double prior_wall = 0;
    RunMeta meta{opts.argv, world, device};
    std::string ckpt_path;
    if (rank == 0) {
        if (!opts.resume.empty()) {
            ResumeTarget target = resolve_resume(opts.resume, cfg);
            if (target.checkpoint) {
                ckpt_path = target.checkpoint->string();
                run_dir = RunDir::open(target.run_dir);
            } else {
                // --resume auto and the run has no checkpoint yet: start it (reusing a directory a crash left).
                std::error_code ec;
                if (std::filesystem::is_directory(target.run_dir, ec) &&
                    std::filesystem::exists(target.run_dir / "config.yaml", ec)) {
                    run_dir = RunDir::open(target.run_dir);
                    truncate_metrics_after(run_dir->metrics_path(), 0);
                } else {
                    run_dir = RunDir::create(cfg, meta);
                }
                log_line(fmt::format("resume auto: no checkpoint in '{}', starting the run", target.run_dir.string()));
            }
        } else {
            run_dir = RunDir::create(cfg, meta);
        }
    }
    const std::string run_path = dc.from_rank0("run_dir", rank == 0 ? run_dir->path().string() : "");
    ckpt_path = dc.from_rank0("checkpoint", ckpt_path);
    if (rank != 0) run_dir = RunDir::open(run_path);
    open_rank_log(run_dir->logs_dir(), rank);
    if (!ckpt_path.empty()) {
        Checkpoint ck = load_checkpoint(ckpt_path);
        const std::filesystem::path state_file = ck.dir / kStateFile;
        const TrainState st = parse_train_state(ck.state, state_file);
        if (!ck.checksummed)
            log_line(fmt::format("resume: '{}' predates per-tensor checksums: its tensors were checked for NaN/inf "
                                 "but not verified",
                                 ck.dir.string()));
        ConfigDiff diff = diff_for_resume(st.config, cfg.resolved);
        if (!diff.identity.empty()) {
            std::string msg = fmt::format("cannot resume from '{}': its model or data differ from this config:",
                                          ck.dir.string());
            for (const auto& l : diff.identity) msg += "\n  " + l;
            throw InputError(msg + "\n(hint: start a new run, or resume with the checkpoint's config.yaml)");
        }
        for (const auto& l : diff.cadence) log_line("resume: changed " + l);
        for (const auto& l : diff.other) log_line("resume: changed " + l);
        load_params(model, ck.model);
        const int ck_world = st.world_size, ck_zero = st.zero_stage;
        if (zero || ck_zero == 1) {
            LLMT_CHECK_AS(CheckpointError, zero && ck_zero == 1 && ck_world == world,
                          "checkpoint '{}' was saved with dist.zero_stage {} by {} ranks; this run has zero_stage {} "
                          "and {} ranks: ZeRO-1 optimizer shards resume only with the same world size and "
                          "zero_stage (hint: relaunch with --nproc-per-node/--nnodes giving {} ranks)",
                          ck.dir.string(), ck_zero, ck_world, zero ? 1 : 0, world, ck_world);
            SafetensorsFile opt_shard = SafetensorsFile::open(ck.dir / zero_optimizer_file(rank));
            verify_checkpoint_file(ck, opt_shard);
            opt.load_state(opt_shard);
        } else {
            LLMT_CHECK_AS(CheckpointError, ck.optimizer.has_value(), "checkpoint '{}' has no {}", ck.dir.string(),
                          kOptimizerFile);
            opt.load_state(*ck.optimizer);
            if (ck_world != world)
                log_line(fmt::format("resume: the checkpoint was trained by {} ranks, this run has {}: the global "
                                     "batch changes from {} to {} rows",
                                     ck_world, world, B * accum * ck_world, B * accum * world));
        }
        try {
            loader.restore(st.loader);
        } catch (const InputError& e) {
            throw CheckpointError(fmt::format("'{}': field \"loader\": {}", state_file.string(), e.what()));
        }
        step = ck.step;
        tokens = st.tokens;
        if (st.best_val_loss) best_val = *st.best_val_loss;
        prior_wall = st.wall_s;
        if (rank == 0) truncate_metrics_after(run_dir->metrics_path(), step);
        log_line(fmt::format("resume: {} at step {} ({} tokens seen)", ck.dir.string(), step, tokens));
    }
    log_line(fmt::format("run: {} ({})", run_dir->run_id(), run_dir->path().string()));
    MetricsLog metrics(cfg.tracking.jsonl && rank == 0 ? run_dir->metrics_path() : std::filesystem::path());
    tracking::Tracker tracker(cfg, run_dir->path(), run_dir->run_id(), rank, step);  // TensorBoard, MLflow
    metrics.also_to([&tracker](const nlohmann::ordered_json& r) { tracker.log(r); });

    int64_t last_saved_step = -1;
    int saves = 0;
    // Every rank calls save() at the same steps. Rank 0 writes the checkpoint; under ZeRO-1 every other
    // rank first writes its optimizer shard into rank 0's temp directory, so the one atomic rename
    // publishes all shards together.
    auto save = [&](bool mark_best) {
        last_saved_step = step;
        ++saves;
        SaveOptions so;
        so.keep_last = tc.keep_last;
        so.mark_best = mark_best;
        std::optional<CheckpointWriter> w;
        if (rank == 0) w.emplace(run_dir->checkpoints_dir(), step, so);
        if (zero) {
            const std::filesystem::path tmp =
                dc.from_rank0(fmt::format("ckpt_tmp/{}", saves), rank == 0 ? w->temp_dir().string() : "");
            if (rank != 0) write_safetensors(tmp / zero_optimizer_file(rank), opt.state_tensors(), opt.state_metadata());
            dc.barrier();
        }
        if (rank != 0) return std::filesystem::path();
        std::vector<std::vector<float>> scratch;
        // Device parameters are staged in host memory: the file is the same whichever device wrote it.
        const Arena host_params = dev == Device::kCpu ? Arena() : host_copy(model.params());
        w->write_tensors(kModelFile,
                         models::gpt2_hf_tensors(model, dev == Device::kCpu ? model.params() : host_params, scratch),
                         {{"format", "pt"}});
        w->write_tensors(zero ? zero_optimizer_file(0) : kOptimizerFile, opt.state_tensors(), opt.state_metadata());
        w->write_state({{"step", step},
                                   {"tokens", tokens},
                                   {"loader", loader.state()},
                                   {"best_val_loss", std::isfinite(best_val) ? nlohmann::json(best_val) : nlohmann::json()},
                                   {"world_size", world},
                                   {"zero_stage", zero ? 1 : 0},
                                   {"wall_s", prior_wall},
                                   {"config", cfg.resolved}});
        models::gpt2_write_hf_config(model.config(), w->temp_dir());  // so the step dir loads in transformers
        return w->commit();
    };

    const double flops_per_token = mc.flops_per_token(T);
    MfuMeter mfu_meter(mfu_peak(dev));
    log_line(fmt::format("mfu: model FLOPs per token ({:.3g}) x tokens/s, against {}", flops_per_token,
                         mfu_meter.peak().what));
    const int64_t tokens_per_step = static_cast<int64_t>(B) * T * accum * world;
    std::vector<int32_t> x(static_cast<size_t>(B) * T), y(x.size());
    float* params = static_cast<float*>(model.params().data());
    float* grads = static_cast<float*>(model.grads().data());
    const size_t n_grads = model.grads().nbytes() / sizeof(float);
    double last_loss = std::nan(""), last_val = std::nan("");
    int64_t last_eval_step = -1;
    Stopwatch run_clock;
    double train_time = 0;
    int64_t steps_this_run = 0;
    const bool bar = opts.progress && stderr_is_tty();

    // Data parallelism: the Reducer all-reduces gradient buckets while backward runs (DDP); under
    // ZeRO-1 gradients are reduce-scattered after the accumulation window instead, each rank updates
    // its shard and the parameters are all-gathered.
    std::unique_ptr<dist::Reducer> reducer;
    if (sync.bucket_bytes > 0) {
        reducer = std::make_unique<dist::Reducer>(dc.pg(), model.grads().data(), model.grads().nbytes(),
                                                  sync.bucket_bytes, sync.overlap, model.device());
        model.set_grads_ready_hook([&](size_t offset) { reducer->grads_ready_from(offset); });
    }
    // ZeRO-1 (DistContext: staging on the model's device): grads[slice] = mean over ranks, returns the
    // global sum of squares; then every rank's updated slice of the parameters to every rank, and the
    // bf16 compute copy refreshed from them.
    auto zero_reduce_grads = [&]() { return dc.zero_reduce_grads(grads, arena_numel); };
    auto zero_gather_params = [&]() {
        dc.zero_gather_params(params, arena_numel);
        model.sync_compute_params();
    };

    auto run_eval = [&]() {
        if (!eval_loader) return;
        Stopwatch sw;
        auto ev = evaluate(model, *eval_loader, B, T, tc.eval_steps);
        ev.loss = dc.mean(ev.loss);  // every rank evaluated its rows of the same batches
        ev.tokens *= world;
        last_val = ev.loss;
        last_eval_step = step;
        bool best = ev.loss < best_val;
        if (best) best_val = ev.loss;
        metrics.write({{"step", step}, {"val_loss", ev.loss}, {"val_ppl", std::exp(ev.loss)},
                       {"val_tokens", ev.tokens}, {"best_val_loss", best_val}, {"eval_ms", sw.seconds() * 1e3}});
        log_line(fmt::format("{}eval step {}: val loss {:.4f} (ppl {:.1f}){}", bar ? "\n" : "", step, ev.loss,
                             std::exp(ev.loss), best ? ", best so far" : ""));
        if (best && step > 0) {
            auto dir = save(true);
            log_line(fmt::format("checkpoint: {} (best)", dir.string()));
        }
    };

    int exit_code = 0;
    while (step < tc.max_steps) {
        Stopwatch sw;
        model.zero_grad();
        double loss_sum = 0;
        for (int m = 0; m < accum; ++m) {
            loader.next(x.data(), y.data());
            // One dropout seed per (seed, step, micro-step): resume reproduces the masks.
            // One dropout seed per (seed, rank, step, micro-step): resume reproduces the masks.
            model.set_dropout_seed(splitmix64(splitmix64(static_cast<uint64_t>(cfg.run.seed) ^ 0x64726f70ULL) +
                                              (static_cast<uint64_t>(rank) << 48) +
                                              static_cast<uint64_t>(step) * 4096 + static_cast<uint64_t>(m)));
            loss_sum += model.forward(x.data(), y.data(), B, T, /*train=*/true, 1.0f / static_cast<float>(accum));
            if (reducer) reducer->begin_backward(/*sync=*/m == accum - 1);  // no_sync until the last micro-step
            model.backward();
            if (reducer) reducer->finish();
        }
        const double norm = optim::global_norm_from_sumsq(zero ? zero_reduce_grads()
                                                               : optim::grad_sum_squares(grads, n_grads, dev));
        if (!std::isfinite(norm))
            throw Error(fmt::format("step {}: the gradient norm is {} (loss {}); stopping before the weights are "
                                    "corrupted (hint: lower trainer.lr)",
                                    step + 1, norm, loss_sum / accum));
        float coef = optim::clip_coefficient(norm, tc.max_grad_norm);
        double lr = sched.at(step);
        opt.step(params, grads, static_cast<float>(lr), coef, model.compute_params());
        if (zero) zero_gather_params();
        ++step;
        ++steps_this_run;
        tokens += tokens_per_step;
        if (dev == Device::kCuda && steps_this_run == 1) {
            const auto mem = kernels::device_memory_info(dev);
            log_line(fmt::format("device: {:.2f} GiB of GPU memory in use after the first step (of {:.1f} GiB)",
                                 (mem.total - mem.free) / 1073741824.0, mem.total / 1073741824.0));
        }
        double dt = sw.seconds();
        train_time += dt;
        last_loss = dc.mean(loss_sum / accum);
        if (step % tc.log_every_steps == 0 || step == 1 || step == tc.max_steps) {
            double tps = static_cast<double>(tokens_per_step) / dt;
            const double mfu = mfu_meter.fraction(flops_per_token * tps);
            if (auto note = mfu_meter.raised()) log_line(*note);
            metrics.write({{"step", step}, {"loss", last_loss}, {"lr", lr}, {"grad_norm", norm}, {"ms", dt * 1e3},
                           {"tokens_per_sec", tps}, {"mfu", mfu}, {"tokens", tokens}});
            double eta = (tc.max_steps - step) * (train_time / static_cast<double>(steps_this_run));
            std::string line = fmt::format("step {:>6}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.0f} ms | "
                                           "{:.0f} tok/s | mfu {:.1f}% | eta {:.0f}s",
                                           step, tc.max_steps, last_loss, lr, norm, dt * 1e3, tps, 100 * mfu, eta);
            if (bar) fmt::print(stderr, "\r{}", line);
            else log_line(line);
        }
        // A signal reaches the ranks at slightly different times: they agree to stop at the same step.
        const bool stop = dc.mean(stop_signal() != 0 ? 1.0 : 0.0) > 0;
        if (tc.eval_every_steps > 0 && step % tc.eval_every_steps == 0 && !stop) run_eval();
        bool at_end = step == tc.max_steps || step == opts.stop_at_step;
        bool due = (tc.save_every_steps > 0 && step % tc.save_every_steps == 0) || at_end || stop;
        if (due && last_saved_step != step) {
            prior_wall += run_clock.seconds();
            run_clock.reset();
            auto dir = save(false);
            log_line(fmt::format("{}checkpoint: {}", bar ? "\n" : "", dir.string()));
        }
        if (step == opts.stop_at_step && step < tc.max_steps) {
            log_line(fmt::format("stopping at step {} as asked (--stop-at-step); resume with --resume {}", step,
                                 run_dir->run_id()));
            break;
        }
        if (stop) {
            const int sig = stop_signal() != 0 ? stop_signal() : SIGTERM;  // a peer's signal stops us too
            exit_code = 128 + sig;
            log_line(fmt::format("stopping on signal {} after step {}; resume with --resume {}", sig, step,
                                 run_dir->run_id()));
            break;
        }
    }
    if (exit_code == 0 && eval_loader && tc.eval_every_steps > 0 && last_eval_step != step) run_eval();
    prior_wall += run_clock.seconds();

    nlohmann::ordered_json summary = {
        {"run_id", run_dir->run_id()},
        {"final_train_loss", std::isfinite(last_loss) ? nlohmann::ordered_json(last_loss) : nlohmann::ordered_json()},
        {"final_val_loss", std::isfinite(last_val) ? nlohmann::ordered_json(last_val) : nlohmann::ordered_json()},
        {"best_val_loss", std::isfinite(best_val) ? nlohmann::ordered_json(best_val) : nlohmann::ordered_json()},
        {"steps", step},
        {"tokens", tokens},
        {"wall_s", prior_wall},
        {"tokens_per_sec", train_time > 0 ? static_cast<double>(steps_this_run * tokens_per_step) / train_time : 0.0},
        {"interrupted", exit_code != 0},
        {"device", device},
        {"world_size", world}};
    if (rank == 0) write_file_atomic(run_dir->summary_path(), summary.dump(2) + "\n");
    dc.barrier();  // rank 0 serves the store: nobody leaves while a peer may still talk to it
    tracker.finish(exit_code);  // after the barrier: peers never wait on a tracking server
    return {exit_code, summary};
}

nlohmann::ordered_json run_evaluation(const config::Config& cfg, const std::string& checkpoint) {
    apply_threads(cfg);
    const Device dev = resolve_device(cfg, 1);
    const DType dtype = check_supported(cfg, dev);
    models::Gpt2 model(model_config(cfg), dev, dtype);
    std::string source;
    if (!checkpoint.empty()) {
        Checkpoint ck = load_checkpoint(checkpoint);
        load_params(model, ck.model);
        source = ck.dir.string();
    } else if (cfg.model.init_from != "scratch") {
        auto path = models::gpt2_resolve_init_from(cfg.model.init_from);
        load_params(model, open_init_from(path));
        source = path.string();
    } else {
        throw InputError("eval: nothing to evaluate: give --checkpoint PATH, or set model.init_from");
    }
    DataFiles files = resolve_data(cfg, false);
    if (files.val.empty())
        throw InputError(fmt::format("eval: no validation shards (data.val_shards: '{}')", cfg.data.val_shards));
    data::EvalLoaderOptions eo;
    eo.shard_paths = files.val;
    eo.B = cfg.trainer.micro_batch_size;
    eo.T = cfg.model.block_size;
    eo.vocab_size = static_cast<size_t>(cfg.model.vocab_size);
    eo.format = files.format;
    data::EvalLoader loader(eo);
    auto ev = evaluate(model, loader, eo.B, eo.T, cfg.trainer.eval_steps);
    return {{"val_loss", ev.loss}, {"tokens", ev.tokens}, {"batches", ev.batches}, {"weights", source}};
}

}  // namespace llmt::train
