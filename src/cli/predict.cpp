// `llmtrain predict --checkpoint RUN --images FILE`: an image classifier's labels for images in an IDX file,
// a PGM or a PNG (data/image_file.h), with the softmax probabilities of the top classes; --json for one
// document.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "cli/checkpoint_model.h"
#include "cli/command.h"
#include "core/error.h"
#include "data/image_file.h"
#include "train/image_batches.h"

namespace llmt::cli {

namespace {

struct PredictOptions {
    std::string checkpoint, images;
    int top = 3;
    bool json = false;
};

std::vector<double> softmax(const float* logits, int n) {
    const float mx = *std::max_element(logits, logits + n);
    std::vector<double> p(static_cast<size_t>(n));
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += p[static_cast<size_t>(i)] = std::exp(static_cast<double>(logits[i] - mx));
    for (auto& v : p) v /= sum;
    return p;
}

void predict(const PredictOptions& o) {
    LoadedModel loaded = load_checkpoint_model("predict", o.checkpoint, "", {});
    const config::Config& cfg = loaded.config;
    if (!cfg.model.is_classifier())
        throw InputError(fmt::format("predict: '{}' is a {} checkpoint; predict classifies images (model.arch mlp or "
                                     "cnn); use generate for language models",
                                     loaded.source, cfg.model.arch));
    const data::GreyImages g = data::read_images_for_prediction(o.images);
    if (g.H != cfg.model.image_size || g.W != cfg.model.image_size || cfg.model.in_channels != 1)
        throw InputError(fmt::format("predict: '{}' holds {}x{} grey images; the model takes {}x{} with {} channel(s)",
                                     o.images, g.H, g.W, cfg.model.image_size, cfg.model.image_size,
                                     cfg.model.in_channels));
    const auto names = train::class_names(cfg);
    const int C = cfg.model.num_classes, T = g.H * g.W, top = std::clamp(o.top, 1, C);
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    std::vector<int32_t> x(static_cast<size_t>(T));
    for (size_t i = 0; i < g.images.size(); ++i) {
        std::copy(g.images[i].begin(), g.images[i].end(), x.begin());
        (void)loaded.model->forward(x.data(), nullptr, 1, T, /*train=*/false);
        const auto p = softmax(loaded.model->logits(), C);
        std::vector<int> order(static_cast<size_t>(C));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
        nlohmann::ordered_json row = {{"image", i}, {"label", order[0]}, {"name", names[order[0]]},
                                      {"probability", p[order[0]]}, {"top", nlohmann::ordered_json::array()}};
        std::string line = fmt::format("image {}: {} ({}) p={:.4f}", i, order[0], names[order[0]], p[order[0]]);
        for (int k = 0; k < top; ++k) {
            row["top"].push_back({{"label", order[k]}, {"name", names[order[k]]}, {"probability", p[order[k]]}});
            if (k > 0) line += fmt::format(" | {} ({}) {:.4f}", order[k], names[order[k]], p[order[k]]);
        }
        if (!o.json) fmt::print("{}\n", line);
        out.push_back(row);
    }
    if (o.json) fmt::print("{}\n", out.dump());
}

}  // namespace

void register_predict(CLI::App& app, Runtime& rt) {
    auto* cmd = app.add_subcommand("predict", "Classify images with an image-classifier checkpoint (model.arch mlp/cnn)");
    auto o = std::make_shared<PredictOptions>();
    cmd->add_option("--checkpoint", o->checkpoint, "a checkpoints/step_N directory, a checkpoints/ directory or a run directory")
        ->required();
    cmd->add_option("--images", o->images, "an IDX file of images (raw or .gz), or one PGM or PNG image")->required();
    cmd->add_option("--top", o->top, "classes listed per image, most probable first (default 3)");
    cmd->add_flag("--json", o->json, "print one JSON array: per image its label, name, probability and top classes");
    cmd->callback([o, &rt] {
        predict(*o);
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
