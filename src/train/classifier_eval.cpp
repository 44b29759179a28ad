#include "train/classifier_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "models/classifier.h"

namespace llmt::train {

int64_t ClassEval::correct() const {
    int64_t c = 0;
    for (int k = 0; k < classes; ++k) c += confusion[static_cast<size_t>(k) * classes + k];
    return c;
}

double ClassEval::accuracy() const { return images > 0 ? static_cast<double>(correct()) / images : std::nan(""); }
double ClassEval::loss() const { return images > 0 ? loss_sum / images : std::nan(""); }

std::vector<double> ClassEval::per_class_accuracy() const {
    std::vector<double> acc(static_cast<size_t>(classes), 0.0);
    for (int t = 0; t < classes; ++t) {
        int64_t row = 0;
        for (int p = 0; p < classes; ++p) row += confusion[static_cast<size_t>(t) * classes + p];
        if (row > 0)
            acc[static_cast<size_t>(t)] = static_cast<double>(confusion[static_cast<size_t>(t) * classes + t]) / row;
    }
    return acc;
}

nlohmann::ordered_json ClassEval::to_json(const std::vector<std::string>& names, const std::string& prefix) const {
    nlohmann::ordered_json m = nlohmann::ordered_json::array();
    for (int t = 0; t < classes; ++t) {
        nlohmann::ordered_json row = nlohmann::ordered_json::array();
        for (int p = 0; p < classes; ++p) row.push_back(confusion[static_cast<size_t>(t) * classes + p]);
        m.push_back(row);
    }
    return {{prefix + "_accuracy", accuracy()},
            {prefix + "_loss", loss()},
            {prefix + "_images", images},
            {"per_class_accuracy", per_class_accuracy()},
            {"confusion_matrix", m},
            {"class_names", names}};
}

std::string ClassEval::table(const std::vector<std::string>& names) const {
    size_t w = 5;
    for (const auto& n : names) w = std::max(w, n.size());
    std::string s = fmt::format("{:<{}}  {:>6}  {:>8}\n", "class", w, "images", "accuracy");
    const auto acc = per_class_accuracy();
    for (int t = 0; t < classes; ++t) {
        int64_t row = 0;
        for (int p = 0; p < classes; ++p) row += confusion[static_cast<size_t>(t) * classes + p];
        s += fmt::format("{:<{}}  {:>6}  {:>7.2f}%\n", names[static_cast<size_t>(t)], w, row,
                         100 * acc[static_cast<size_t>(t)]);
    }
    s += fmt::format("{:<{}}  {:>6}  {:>7.2f}%  (loss {:.4f})\n", "all", w, images, 100 * accuracy(), loss());
    s += "confusion matrix (rows: true class, columns: predicted)\n";
    for (int t = 0; t < classes; ++t) {
        s += fmt::format("{:>3} |", t);
        for (int p = 0; p < classes; ++p) s += fmt::format(" {:>5}", confusion[static_cast<size_t>(t) * classes + p]);
        s += "\n";
    }
    return s;
}

std::vector<int64_t> all_indices(int64_t n) {
    std::vector<int64_t> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), int64_t{0});
    return v;
}

ClassEval evaluate_images(models::Classifier& model, const data::ImageSet& set, int slot,
                          const std::vector<int64_t>& indices, int B, int rank, int world) {
    ClassEval e;
    e.classes = model.num_classes();
    e.confusion.assign(static_cast<size_t>(e.classes) * e.classes, 0);
    const size_t n = indices.size();
    const size_t first = n * static_cast<size_t>(rank) / static_cast<size_t>(world);
    const size_t last = n * static_cast<size_t>(rank + 1) / static_cast<size_t>(world);
    // One device loop over this rank's share (Classifier::classify_images): the images are gathered from the
    // set bound at `slot`, predictions and loss sums come back once.
    const int64_t count = static_cast<int64_t>(last - first);
    std::vector<int64_t> idx(indices.begin() + static_cast<int64_t>(first),
                             indices.begin() + static_cast<int64_t>(last));
    std::vector<int32_t> y(static_cast<size_t>(count)), pred(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
        y[static_cast<size_t>(i)] = set.labels[static_cast<size_t>(idx[static_cast<size_t>(i)])];
    e.loss_sum = model.classify_images(slot, idx.data(), y.data(), count, B, pred.data());
    for (int64_t i = 0; i < count; ++i)
        ++e.confusion[static_cast<size_t>(y[static_cast<size_t>(i)]) * e.classes + pred[static_cast<size_t>(i)]];
    e.images = count;
    return e;
}

void sum_over_ranks(ClassEval& e, const std::function<void(std::vector<double>&)>& sum) {
    std::vector<double> v;
    v.reserve(e.confusion.size() + 2);
    v.push_back(static_cast<double>(e.images));
    v.push_back(e.loss_sum);
    for (int64_t c : e.confusion) v.push_back(static_cast<double>(c));
    sum(v);
    e.images = std::llround(v[0]);
    e.loss_sum = v[1];
    for (size_t i = 0; i < e.confusion.size(); ++i) e.confusion[i] = std::llround(v[i + 2]);
}

}  // namespace llmt::train
