// `llmtrain predict --checkpoint RUN --images FILE|DIR...`: an image classifier's labels for images in IDX
// files, PGMs or PNGs (data/images/image_file.h), given one by one or as directories of them, with the softmax
// probabilities of the top classes; --json for one document.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>

#include "cli/checkpoint_model.h"
#include "cli/command.h"
#include "core/error.h"
#include "data/images/image_file.h"
#include "train/image_batches.h"

namespace llmt::cli {

namespace {

struct PredictOptions {
    std::string checkpoint;
    std::vector<std::string> images;
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

// A file's name says it holds images: .png, .pgm, or an IDX file (its name has "idx", raw or .gz).
bool image_file_name(const std::filesystem::path& p) {
    const std::string name = p.filename().string(), ext = p.extension().string();
    return ext == ".png" || ext == ".pgm" || name.find("idx") != std::string::npos;
}

// The files --images names: each file as given, each directory's image files sorted by name. A directory
// without any is an InputError naming it.
std::vector<std::string> image_files(const std::vector<std::string>& given) {
    namespace fs = std::filesystem;
    std::vector<std::string> files;
    for (const std::string& g : given) {
        std::error_code ec;
        if (!fs::is_directory(g, ec)) {
            files.push_back(g);
            continue;
        }
        std::vector<std::string> in_dir;
        for (const auto& e : fs::directory_iterator(g, ec))
            if (e.is_regular_file(ec) && image_file_name(e.path())) in_dir.push_back(e.path().string());
        if (in_dir.empty())
            throw InputError(fmt::format("predict: --images directory '{}' holds no image files (.png, .pgm, or IDX "
                                         "files named *idx*)",
                                         g));
        std::sort(in_dir.begin(), in_dir.end());
        files.insert(files.end(), in_dir.begin(), in_dir.end());
    }
    return files;
}

void predict(const PredictOptions& o) {
    LoadedModel loaded = load_checkpoint_model("predict", o.checkpoint, "", {});
    const config::Config& cfg = loaded.config;
    if (!cfg.model.is_classifier())
        throw InputError(fmt::format("predict: '{}' is a {} checkpoint; predict classifies images (model.arch mlp or "
                                     "cnn); use generate for language models",
                                     loaded.source, cfg.model.arch));
    const auto names = train::class_names(cfg);
    const config::ModelConfig::Classifier& m = cfg.model.classifier;
    const int C = m.num_classes, top = std::clamp(o.top, 1, C);
    const std::vector<std::string> files = image_files(o.images);
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    std::size_t n = 0;  // images so far, over all files
    for (const std::string& file : files) {
        const data::GreyImages g = data::read_images_for_prediction(file);
        if (g.H != m.image_size || g.W != m.image_size || m.in_channels != 1)
            throw InputError(
                fmt::format("predict: '{}' holds {}x{} grey images; the model takes {}x{} with {} channel(s)", file,
                            g.H, g.W, m.image_size, m.image_size, m.in_channels));
        const int T = g.H * g.W;
        std::vector<int32_t> x(static_cast<size_t>(T));
        for (size_t i = 0; i < g.images.size(); ++i, ++n) {
            std::copy(g.images[i].begin(), g.images[i].end(), x.begin());
            (void)loaded.model->forward(x.data(), nullptr, 1, T, /*train=*/false);
            const auto p = softmax(loaded.model->logits(), C);
            std::vector<int> order(static_cast<size_t>(C));
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
            nlohmann::ordered_json row = {{"image", n}, {"file", file}, {"index", i}, {"label", order[0]},
                                          {"name", names[order[0]]}, {"probability", p[order[0]]},
                                          {"top", nlohmann::ordered_json::array()}};
            // One file of one image: "image 0 (FILE)"; several in a file: "image 7 (FILE #3)".
            const std::string where = g.images.size() == 1 ? file : fmt::format("{} #{}", file, i);
            std::string line = fmt::format("image {} ({}): {} ({}) p={:.4f}", n, where, order[0], names[order[0]],
                                           p[order[0]]);
            for (int k = 0; k < top; ++k) {
                row["top"].push_back({{"label", order[k]}, {"name", names[order[k]]}, {"probability", p[order[k]]}});
                if (k > 0) line += fmt::format(" | {} ({}) {:.4f}", order[k], names[order[k]], p[order[k]]);
            }
            if (!o.json) fmt::print("{}\n", line);
            out.push_back(row);
        }
    }
    if (o.json) fmt::print("{}\n", out.dump());
}

}  // namespace

void register_predict(CLI::App& app, Runtime& rt) {
    auto* cmd =
        app.add_subcommand("predict", "Classify images with an image-classifier checkpoint (model.arch mlp/cnn)");
    auto o = std::make_shared<PredictOptions>();
    cmd->add_option("--checkpoint", o->checkpoint,
                    "a checkpoints/step_N directory, a checkpoints/ directory or a run directory")
        ->required();
    cmd->add_option("--images", o->images,
                    "IDX files of images (raw or .gz), PGM or PNG images, or directories of them (repeatable; "
                    "several after one --images)")
        ->required();
    cmd->add_option("--top", o->top, "classes listed per image, most probable first (default 3)");
    cmd->add_flag("--json", o->json, "print one JSON array: per image its label, name, probability and top classes");
    cmd->callback([o, &rt] {
        predict(*o);
        rt.exit_code = 0;
    });
}

}  // namespace llmt::cli
