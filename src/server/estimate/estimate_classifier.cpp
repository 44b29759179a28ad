// Image-classifier estimates from images/s rows (estimate_classifier.h).
#include "server/estimate/estimate_classifier.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "config/arch_table.h"
#include "core/error.h"
#include "data/images/idx.h"
#include "models/classifier.h"
#include "server/estimate/estimate_parts.h"

namespace llmt::server {

namespace {

// What a classifier run is, in the units its rows count.
struct ImageJob {
    bool gpu = false;
    int world = 1;
    int threads = 0;  // per rank (run.threads; 0 = all cores)
    std::string arch, shape, precision;
    int B = 0, accum = 1;  // per-rank micro-batch, gradient accumulation
    double flops_per_image = 0;
    int64_t epochs = 0, max_steps = 0;
    std::optional<int64_t> train_images;  // the training split (data.train_images less data.val_fraction)
    std::string train_images_why;         // why it is not known
};

// The training split's size from the IDX header alone, as the trainer splits it (data/images/image_set.h).
void count_train_images(const config::Config& cfg, ImageJob& j) {
    try {
        const int64_t n = data::read_idx_dims(cfg.data.train_images, 3).at(0);
        j.train_images = n - static_cast<int64_t>(std::llround(static_cast<double>(n) * cfg.data.val_fraction));
    } catch (const Error& e) {
        j.train_images_why = fmt::format("data.train_images cannot be read here: {}", e.what());
    }
}

ImageJob image_job_of(const JobSpec& spec, const config::Config& cfg) {
    ImageJob j;
    j.gpu = spec.gpus_per_node > 0 || cfg.run.device == "cuda";
    j.world = spec.cpus();
    j.threads = j.gpu ? 0 : cfg.run.threads;
    j.arch = cfg.model.arch;
    j.shape = classifier_shape(cfg.model);
    j.precision = cfg.trainer.precision;
    j.B = cfg.trainer.micro_batch_size;
    j.accum = cfg.trainer.grad_accum_steps;
    j.flops_per_image = models::ClassifierConfig::from(cfg).train_flops_per_image();
    j.epochs = cfg.trainer.epochs;
    j.max_steps = cfg.trainer.max_steps;
    count_train_images(cfg, j);
    return j;
}

// Images a run of W ranks trains: epochs x the sampler's padded epoch (ceil(n / W) per rank), or
// max_steps of the job's global batch (the same images at every W). nullopt: the epoch size is unknown.
std::optional<double> images_at(const ImageJob& j, int W) {
    if (j.epochs > 0) {
        if (!j.train_images) return std::nullopt;
        return static_cast<double>(j.epochs) * static_cast<double>((*j.train_images + W - 1) / W) * W;
    }
    return static_cast<double>(j.max_steps) * j.B * j.accum * j.world;
}

// Optimizer steps at W (train/image_batches.h steps_for_epochs with epochs; else the same images).
double steps_at(const ImageJob& j, int W, double images) {
    if (j.epochs > 0) {
        const int64_t micro = ((*j.train_images + W - 1) / W + j.B - 1) / j.B;
        return static_cast<double>((j.epochs * micro + j.accum - 1) / j.accum);
    }
    return images / (static_cast<double>(j.B) * j.accum * W);
}

std::string images_basis(const ImageJob& j) {
    if (j.epochs > 0) {
        if (!j.train_images) return fmt::format("trainer.epochs {}: {}", j.epochs, j.train_images_why);
        return fmt::format("trainer.epochs {} x {} training images (data.train_images less data.val_fraction), each "
                           "rank's share rounded up as DistributedSampler pads it",
                           j.epochs, *j.train_images);
    }
    return fmt::format("trainer.max_steps {} x global batch {} images (micro_batch_size {} x grad_accum_steps {} x {} "
                       "rank{})",
                       j.max_steps, j.B * j.accum * j.world, j.B, j.accum, j.world, j.world == 1 ? "" : "s");
}

// The rows of the job's arch on its device, narrowed to its micro-batch and precision where such rows
// exist (a small model's rate depends on both, most of all on a GPU); `note` says what did not match.
struct Picked {
    std::vector<ThroughputRow> rows;
    std::vector<std::string> notes;
};

template <typename Pred>
void prefer(Picked& p, Pred keep, const std::string& what) {
    std::vector<ThroughputRow> kept;
    for (const ThroughputRow& r : p.rows)
        if (keep(r)) kept.push_back(r);
    if (!kept.empty()) {
        p.rows = std::move(kept);
        return;
    }
    if (!p.rows.empty()) p.notes.push_back(fmt::format("no row at the job's {}: rows of other values used", what));
}

Picked pick_rows(const ImageJob& j, const ThroughputTable& table) {
    Picked p;
    const std::string dev = j.gpu ? "cuda" : "cpu";
    for (const ThroughputRow& r : rows_of_arch(table.rows, j.arch))
        if (r.device == dev && (table.card.empty() || r.card.find(table.card) != std::string::npos))
            p.rows.push_back(r);
    prefer(p, [&](const ThroughputRow& r) { return r.micro_batch_size == j.B; },
           fmt::format("micro_batch_size {}", j.B));
    prefer(p, [&](const ThroughputRow& r) { return r.precision == j.precision; },
           fmt::format("trainer.precision {}", j.precision));
    return p;
}

std::string rate_basis(const ImageJob& j, const ThroughputEstimate& t, const Picked& p) {
    std::string s = t.rate_basis == "measured for this model size"
                        ? fmt::format("measured for this shape ({})", j.shape)
                        : fmt::format("no row of this shape ({}): {}", j.shape, t.rate_basis);
    for (const std::string& n : p.notes) s += "; " + n;
    return s;
}

std::string unmeasured_reason(const ImageJob& j, const ThroughputTable& table, const ThroughputEstimate& t) {
    if (table.path.empty()) return "no throughput table found (configs/throughput.jsonl; --throughput-file)";
    if (!t.measured)
        return fmt::format("{} has no world-size-1 images/s row of model.arch {} for device {}{}", table.path, j.arch,
                           j.gpu ? "cuda" : "cpu",
                           table.card.empty() ? "" : fmt::format(" on a card matching '{}'", table.card));
    return fmt::format("trainer.epochs {} needs the training set's size: {}", j.epochs, j.train_images_why);
}

// Rate, duration and cost at world size W; null when the rows or the epoch size are missing.
nlohmann::json at_world(const ImageJob& j, const Rates& rates, const Picked& p, const std::string& card, int W,
                        ThroughputEstimate* out) {
    *out = estimate_throughput(p.rows, j.gpu ? "cuda" : "cpu", card, j.flops_per_image, W, j.threads, "image");
    const std::optional<double> images = images_at(j, W);
    if (!out->measured || !images) return nullptr;
    const double ips = out->tokens_per_s_rank * W * out->efficiency;
    const double seconds = *images / ips;
    const double device_hours = seconds / 3600 * W;
    nlohmann::json w = {{"world_size", W},
                        {"images_per_s", ips},
                        {"efficiency", out->efficiency},
                        {"images", *images},
                        {"steps", steps_at(j, W, *images)},
                        {"global_batch_images", j.B * j.accum * W},
                        {"duration_s", seconds},
                        {"device_hours", device_hours},
                        {"cost_usd", cost_or_null(device_hours, j.gpu ? rates.gpu_hour_usd : rates.cpu_hour_usd)}};
    w["seconds_per_epoch"] = j.train_images
                                 ? nlohmann::json(static_cast<double>((*j.train_images + W - 1) / W) * W / ips)
                                 : nlohmann::json(nullptr);
    return w;
}

nlohmann::json common_fields(const ImageJob& j, const Rates& rates, const ThroughputTable& table) {
    return {{"workload", "image_classifier"},
            {"device", j.gpu ? "cuda" : "cpu"},
            {"model", j.shape},
            {"flops_per_image", j.flops_per_image},
            {"images_per_epoch", j.train_images ? nlohmann::json(*j.train_images) : nlohmann::json(nullptr)},
            {"epochs", j.epochs},
            {"max_steps", j.max_steps},
            {"images_basis", images_basis(j)},
            {"cost_basis", cost_basis(j.gpu, rates)},
            {"throughput_table", table.path}};
}

}  // namespace

std::string classifier_shape(const config::ModelConfig& m) {
    const config::ModelConfig::Classifier& c = m.classifier;
    std::string s = fmt::format("{} {}x{}x{}", m.arch, c.image_size, c.image_size, c.in_channels);
    if (config::find_arch(m.arch)->reads("model.conv_channels"))
        s += fmt::format(" c{}", fmt::join(c.conv_channels, ","));
    if (!c.hidden_sizes.empty()) s += fmt::format(" h{}", fmt::join(c.hidden_sizes, ","));
    return s + fmt::format(" k{}", c.num_classes);
}

nlohmann::json estimate_classifier_job(const JobSpec& spec, const config::Config& cfg, const Rates& rates,
                                       const ThroughputTable& table) {
    const ImageJob j = image_job_of(spec, cfg);
    const Picked p = pick_rows(j, table);
    ThroughputEstimate t;
    nlohmann::json w = at_world(j, rates, p, table.card, j.world, &t);
    nlohmann::json out = common_fields(j, rates, table);
    out["world_size"] = j.world;
    out["images"] = images_at(j, j.world) ? nlohmann::json(*images_at(j, j.world)) : nlohmann::json(nullptr);
    if (w.is_null()) {
        out["source"] = "unmeasured";
        out["reason"] = unmeasured_reason(j, table, t);
        out["duration_s"] = out["device_hours"] = out["cost_usd"] = nullptr;
        return out;
    }
    out["source"] = "measured";
    for (auto& [k, v] : w.items()) out[k] = v;
    out["card"] = t.card;
    out["basis"] = {{"images_per_s_rank", t.tokens_per_s_rank},
                    {"threads_per_rank", t.threads_per_rank},
                    {"rate", rate_basis(j, t, p)},
                    {"efficiency", t.efficiency_basis}};
    out["rows_used"] = rows_json(table, t.rows_used);
    return out;
}

nlohmann::json estimate_classifier_scaling(const JobSpec& spec, const config::Config& cfg, const Rates& rates,
                                           const ThroughputTable& table, int max_world) {
    const ImageJob j = image_job_of(spec, cfg);
    const Picked p = pick_rows(j, table);
    nlohmann::json out = common_fields(j, rates, table);
    out["job_world_size"] = j.world;
    nlohmann::json worlds = nlohmann::json::array();
    std::vector<int> lines;
    double base = 0;
    for (int W = 1; W <= max_world; ++W) {
        ThroughputEstimate t;
        nlohmann::json w = at_world(j, rates, p, table.card, W, &t);
        if (w.is_null()) {
            out["source"] = "unmeasured";
            out["reason"] = unmeasured_reason(j, table, t);
            out["worlds"] = nlohmann::json::array();
            return out;
        }
        if (W == 1) {
            base = w["duration_s"];
            out["card"] = t.card;
            out["rate_basis"] = rate_basis(j, t, p);
            out["images_per_s_rank"] = t.tokens_per_s_rank;
            out["threads_per_rank"] = t.threads_per_rank;
        }
        w["speedup"] = base / w["duration_s"].get<double>();
        w["efficiency_basis"] = t.efficiency_basis;
        worlds.push_back(w);
        lines.insert(lines.end(), t.rows_used.begin(), t.rows_used.end());
    }
    std::sort(lines.begin(), lines.end());
    lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
    out["source"] = "measured";
    out["worlds"] = worlds;
    out["rows_used"] = rows_json(table, lines);
    return out;
}

}  // namespace llmt::server
