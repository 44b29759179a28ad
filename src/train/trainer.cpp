#include "train/trainer.h"

#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <optional>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/rng.h"
#include "core/time.h"
#include "data/loader.h"
#include "data/prepare_cache.h"
#include "kernels/ops.h"
#include "models/gpt2.h"
#include "models/gpt2_io.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "optim/lr_schedule.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/resume.h"
#include "train/run_dir.h"
#include "train/signals.h"

namespace llmt::train {

namespace {

void log_line(const std::string& s) { fmt::print(stderr, "{}\n", s); }

void apply_threads(const config::Config& cfg) {
    if (cfg.run.threads > 0) omp_set_num_threads(cfg.run.threads);
}

std::string resolve_device(const config::Config& cfg) {
    if (cfg.run.device == "cuda")
        throw InputError("run.device: cuda: this version trains on the CPU only (the CUDA backend is issue #6); "
                         "use run.device: cpu or auto");
    return "cpu";
}

void check_supported(const config::Config& cfg) {
    LLMT_CHECK(cfg.lora.r == 0, "lora.r: {}: LoRA fine-tuning is not implemented in this version; set lora.r: 0",
               cfg.lora.r);
    LLMT_CHECK(cfg.trainer.precision == "fp32",
               "trainer.precision: {} is not available on the CPU in this version; use fp32", cfg.trainer.precision);
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

models::Gpt2 build_model(const config::Config& cfg) {
    models::Gpt2 model(models::Gpt2Config::from(cfg.model));
    if (cfg.model.init_from == "scratch") {
        model.init_random(cfg.run.seed);
    } else {
        auto path = models::gpt2_resolve_init_from(cfg.model.init_from);
        models::gpt2_load_hf(model, model.params(), SafetensorsFile::open(path));
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
    check_supported(cfg);
    apply_threads(cfg);
    const std::string device = resolve_device(cfg);
    const auto& tc = cfg.trainer;
    const int B = tc.micro_batch_size, T = cfg.model.block_size, accum = tc.grad_accum_steps;
    const int world = 1, rank = 0;

    models::Gpt2 model = build_model(cfg);
    const auto& mc = model.config();
    log_line(fmt::format("model: gpt2, {} layers, d_model {}, {} heads, block {}, vocab {} (padded {}), {:.2f}M parameters",
                         mc.n_layer, mc.d_model, mc.n_head, mc.block_size, mc.vocab_size, mc.padded_vocab,
                         static_cast<double>(model.num_parameters()) / 1e6));

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
        auto plan = model.memory_plan(B, T);
        std::vector<int32_t> x(static_cast<size_t>(B) * T), y(x.size());
        loader.next(x.data(), y.data());
        Stopwatch sw;
        float loss = model.forward(x.data(), y.data(), B, T, false);
        nlohmann::ordered_json s = {
            {"dry_run", true},
            {"parameters", model.num_parameters()},
            {"memory_bytes", {{"parameters", plan.params}, {"gradients", plan.grads}, {"optimizer", 2 * plan.params},
                              {"activations", plan.activations},
                              {"total", plan.params * 4 + plan.activations}}},
            {"loss", loss},
            {"forward_ms", sw.seconds() * 1e3},
            {"train_windows", loader.num_windows()},
            {"device", device}};
        return {0, s};
    }

    optim::AdamWConfig ac;
    ac.beta1 = static_cast<float>(tc.betas[0]);
    ac.beta2 = static_cast<float>(tc.betas[1]);
    ac.eps = static_cast<float>(tc.eps);
    ac.weight_decay = static_cast<float>(tc.weight_decay);
    const size_t arena_numel = model.params().nbytes() / sizeof(float);
    optim::AdamW opt(param_slots(model, tc.decay_embeddings), arena_numel, ac);
    optim::LrSchedule sched{optim::parse_schedule_kind(tc.schedule), tc.lr, tc.min_lr, tc.warmup_steps, tc.max_steps};
    sched.validate();

    // Run directory: new, or the one being resumed.
    std::optional<RunDir> run_dir;
    int64_t step = 0, tokens = 0;
    double best_val = std::numeric_limits<double>::infinity();
    double prior_wall = 0;
    RunMeta meta{opts.argv, world, device};
    if (!opts.resume.empty()) {
        ResumeTarget target = resolve_resume(opts.resume, cfg);
        if (target.checkpoint) {
            Checkpoint ck = load_checkpoint(*target.checkpoint);
            ConfigDiff diff = diff_for_resume(ck.state.value("config", nlohmann::json::object()), cfg.resolved);
            if (!diff.identity.empty()) {
                std::string msg = fmt::format("cannot resume from '{}': its model or data differ from this config:",
                                              ck.dir.string());
                for (const auto& l : diff.identity) msg += "\n  " + l;
                throw InputError(msg + "\n(hint: start a new run, or resume with the checkpoint's config.yaml)");
            }
            for (const auto& l : diff.cadence) log_line("resume: changed " + l);
            for (const auto& l : diff.other) log_line("resume: changed " + l);
            models::gpt2_load_hf(model, model.params(), ck.model);
            LLMT_CHECK_AS(CheckpointError, ck.optimizer.has_value(), "checkpoint '{}' has no {}", ck.dir.string(),
                          kOptimizerFile);
            opt.load_state(*ck.optimizer);
            loader.restore(ck.state.at("loader"));
            step = ck.step;
            tokens = ck.state.value("tokens", int64_t{0});
            if (ck.state.contains("best_val_loss") && ck.state["best_val_loss"].is_number())
                best_val = ck.state["best_val_loss"].get<double>();
            prior_wall = ck.state.value("wall_s", 0.0);
            run_dir = RunDir::open(target.run_dir);
            truncate_metrics_after(run_dir->metrics_path(), step);
            log_line(fmt::format("resume: {} at step {} ({} tokens seen)", ck.dir.string(), step, tokens));
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
    log_line(fmt::format("run: {} ({})", run_dir->run_id(), run_dir->path().string()));
    MetricsLog metrics(cfg.tracking.jsonl ? run_dir->metrics_path() : std::filesystem::path());

    int64_t last_saved_step = -1;
    auto save = [&](bool mark_best) {
        last_saved_step = step;
        std::vector<std::vector<float>> scratch;
        auto model_tensors = models::gpt2_hf_tensors(model, model.params(), scratch);
        nlohmann::json state = {{"tokens", tokens},
                                {"loader", loader.state()},
                                {"best_val_loss", std::isfinite(best_val) ? nlohmann::json(best_val) : nlohmann::json()},
                                {"world_size", world},
                                {"wall_s", prior_wall},
                                {"config", cfg.resolved}};
        SaveOptions so;
        so.keep_last = tc.keep_last;
        so.mark_best = mark_best;
        auto dir = save_checkpoint(run_dir->checkpoints_dir(), step, model_tensors, opt.state_tensors(), state, so,
                                   {{"format", "pt"}}, opt.state_metadata());
        models::gpt2_write_hf_config(model.config(), dir);  // so the step dir loads in transformers as is
        return dir;
    };

    const double flops_per_token = mc.flops_per_token(T);
    const double peak = kernels::cpu_peak_flops();
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

    auto run_eval = [&]() {
        if (!eval_loader) return;
        Stopwatch sw;
        auto ev = evaluate(model, *eval_loader, B, T, tc.eval_steps);
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
            model.set_dropout_seed(splitmix64(splitmix64(static_cast<uint64_t>(cfg.run.seed) ^ 0x64726f70ULL) +
                                              static_cast<uint64_t>(step) * 4096 + static_cast<uint64_t>(m)));
            loss_sum += model.forward(x.data(), y.data(), B, T, /*train=*/true, 1.0f / static_cast<float>(accum));
            model.backward();
        }
        double norm = optim::global_norm_from_sumsq(optim::grad_sum_squares(grads, n_grads));
        if (!std::isfinite(norm))
            throw Error(fmt::format("step {}: the gradient norm is {} (loss {}); stopping before the weights are "
                                    "corrupted (hint: lower trainer.lr)",
                                    step + 1, norm, loss_sum / accum));
        float coef = optim::clip_coefficient(norm, tc.max_grad_norm);
        double lr = sched.at(step);
        opt.step(params, grads, static_cast<float>(lr), coef);
        ++step;
        ++steps_this_run;
        tokens += tokens_per_step;
        double dt = sw.seconds();
        train_time += dt;
        last_loss = loss_sum / accum;
        if (step % tc.log_every_steps == 0 || step == 1 || step == tc.max_steps) {
            double tps = static_cast<double>(tokens_per_step) / dt;
            double mfu = flops_per_token * tps / peak;
            metrics.write({{"step", step}, {"loss", last_loss}, {"lr", lr}, {"grad_norm", norm}, {"ms", dt * 1e3},
                           {"tokens_per_sec", tps}, {"mfu", mfu}, {"tokens", tokens}});
            double eta = (tc.max_steps - step) * (train_time / static_cast<double>(steps_this_run));
            std::string line = fmt::format("step {:>6}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.0f} ms | "
                                           "{:.0f} tok/s | mfu {:.1f}% | eta {:.0f}s",
                                           step, tc.max_steps, last_loss, lr, norm, dt * 1e3, tps, 100 * mfu, eta);
            if (bar) fmt::print(stderr, "\r{}", line);
            else log_line(line);
        }
        bool stop = stop_signal() != 0;
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
            exit_code = 128 + stop_signal();
            log_line(fmt::format("stopping on signal {} after step {}; resume with --resume {}", stop_signal(), step,
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
    write_file_atomic(run_dir->summary_path(), summary.dump(2) + "\n");
    return {exit_code, summary};
}

nlohmann::ordered_json run_evaluation(const config::Config& cfg, const std::string& checkpoint) {
    check_supported(cfg);
    apply_threads(cfg);
    resolve_device(cfg);
    models::Gpt2 model(models::Gpt2Config::from(cfg.model));
    std::string source;
    if (!checkpoint.empty()) {
        Checkpoint ck = load_checkpoint(checkpoint);
        models::gpt2_load_hf(model, model.params(), ck.model);
        source = ck.dir.string();
    } else if (cfg.model.init_from != "scratch") {
        auto path = models::gpt2_resolve_init_from(cfg.model.init_from);
        models::gpt2_load_hf(model, model.params(), SafetensorsFile::open(path));
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
