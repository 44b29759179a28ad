// Measured throughput rows and their interpolation (throughput.h).
#include "server/estimate/throughput.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>

#include "config/arch_table.h"
#include "core/error.h"
#include "core/json_parse.h"
#include "core/knobs.h"

namespace llmt::server {

namespace fs = std::filesystem;

nlohmann::json ThroughputRow::to_json() const {
    nlohmann::json j = {{"line", line},           {"device", device},   {"card", card},
                        {"world_size", world_size}, {"threads_per_rank", threads_per_rank},
                        {"model", model},         {"precision", precision}, {"date", date},
                        {"machine", machine},     {"command", command}, {"source", source}};
    if (micro_batch_size > 0) j["micro_batch_size"] = micro_batch_size;
    if (images()) {
        j["arch"] = arch;
        j["flops_per_image"] = flops_per_token;
        j["images_per_s"] = tokens_per_s;
    } else {
        j["flops_per_token"] = flops_per_token;
        j["tokens_per_s"] = tokens_per_s;
    }
    return j;
}

std::vector<ThroughputRow> rows_of_arch(const std::vector<ThroughputRow>& rows, const std::string& arch) {
    std::vector<ThroughputRow> out;
    for (const ThroughputRow& r : rows)
        if (r.arch == arch) out.push_back(r);
    return out;
}

namespace {

template <typename T>
T field(const nlohmann::json& j, const char* key, const std::string& where, const char* expected) {
    auto it = j.find(key);
    if (it == j.end()) throw InputError(fmt::format("{}: missing field '{}' ({})", where, key, expected));
    try {
        return it->get<T>();
    } catch (const nlohmann::json::exception&) {
        throw InputError(fmt::format("{}: field '{}' must be {}", where, key, expected));
    }
}

std::string opt_string(const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Rows of one model shape share flops_per_token up to rounding in the bench scripts.
bool same_model(double a, double b) { return std::abs(a - b) <= 1e-6 * std::max(a, b); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One model shape at one world size and thread count: the median of its rows.
struct Point {
    double fpt = 0, tps = 0;
    int threads = 0;
    std::vector<int> lines;
};

std::vector<Point> points(const std::vector<const ThroughputRow*>& rows, int world) {
    std::vector<Point> out;
    auto same = [](const Point& p, const ThroughputRow* r) {
        return same_model(p.fpt, r->flops_per_token) && p.threads == r->threads_per_rank;
    };
    for (const ThroughputRow* r : rows) {
        if (r->world_size != world) continue;
        auto it = std::find_if(out.begin(), out.end(), [&](const Point& p) { return same(p, r); });
        if (it == out.end()) it = out.insert(out.end(), Point{r->flops_per_token, 0, r->threads_per_rank, {}});
        it->lines.push_back(r->line);
    }
    for (Point& p : out) {
        std::vector<double> t;
        for (const ThroughputRow* r : rows)
            if (r->world_size == world && same(p, r)) t.push_back(r->tokens_per_s);
        p.tps = median(t);
    }
    std::sort(out.begin(), out.end(), [](const Point& a, const Point& b) { return a.fpt < b.fpt; });
    return out;
}

// The rate and FLOPs of a row: tokens (a language model) or, with "images_per_s", images (a classifier
// of "arch" mlp or cnn).
void read_rate(const nlohmann::json& j, const std::string& where, ThroughputRow& r) {
    const bool images = j.contains("images_per_s");
    if (images && j.contains("tokens_per_s"))
        throw InputError(where + ": a row has 'tokens_per_s' (a language model) or 'images_per_s' (an image "
                                 "classifier), not both");
    const char* rate = images ? "images_per_s" : "tokens_per_s";
    const char* flops = images ? "flops_per_image" : "flops_per_token";
    r.flops_per_token = field<double>(j, flops, where, "a number > 0");
    r.tokens_per_s = field<double>(j, rate, where, "a number > 0");
    if (!(r.flops_per_token > 0)) throw InputError(fmt::format("{}: field '{}' must be > 0", where, flops));
    if (!(r.tokens_per_s > 0)) throw InputError(fmt::format("{}: field '{}' must be > 0", where, rate));
    if (!images) return;
    r.arch = field<std::string>(j, "arch", where, "the model.arch of an image classifier");
    if (!config::is_classifier_arch(r.arch))
        throw InputError(fmt::format("{}: field 'arch' must be the model.arch of an image classifier, got \"{}\"",
                                     where, r.arch));
}

}  // namespace

std::vector<ThroughputRow> load_throughput(const fs::path& path) {
    std::ifstream in(path);
    if (!in) throw IoError(fmt::format("{}: cannot open the throughput table", path.string()));
    std::vector<ThroughputRow> rows;
    std::string text;
    for (int line = 1; std::getline(in, text); ++line) {
        if (text.find_first_not_of(" \t\r") == std::string::npos || text[text.find_first_not_of(" \t")] == '#')
            continue;
        const std::string where = fmt::format("{}:{}", path.string(), line);
        const nlohmann::json j = parse_json(text, where, {1 << 20, 8, false});
        if (!j.is_object()) throw InputError(where + ": expected one JSON object per line");
        ThroughputRow r;
        r.line = line;
        r.device = field<std::string>(j, "device", where, "\"cpu\" or \"cuda\"");
        if (r.device != "cpu" && r.device != "cuda")
            throw InputError(
                fmt::format("{}: field 'device' must be \"cpu\" or \"cuda\", got \"{}\"", where, r.device));
        r.card = field<std::string>(j, "card", where, "a string naming the CPU or GPU");
        r.world_size = field<int>(j, "world_size", where, "an integer >= 1");
        read_rate(j, where, r);
        r.date = field<std::string>(j, "date", where, "the measurement date YYYY-MM-DD");
        r.machine = field<std::string>(j, "machine", where, "a string describing the machine");
        r.command = field<std::string>(j, "command", where, "the command that measured it");
        if (r.world_size < 1) throw InputError(where + ": field 'world_size' must be >= 1");
        if (auto it = j.find("threads_per_rank"); it != j.end() && it->is_number_integer()) r.threads_per_rank = *it;
        if (auto it = j.find("micro_batch_size"); it != j.end() && it->is_number_integer()) r.micro_batch_size = *it;
        r.model = opt_string(j, "model");
        r.precision = opt_string(j, "precision");
        r.source = opt_string(j, "source");
        rows.push_back(std::move(r));
    }
    return rows;
}

std::optional<fs::path> default_throughput_file() {
    if (const std::string env = location_value(Location::kThroughputFile); !env.empty()) return fs::path(env);
    std::vector<fs::path> candidates;
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        candidates.push_back(self.parent_path() / "../share/llmtrain/configs/throughput.jsonl");
        candidates.push_back(self.parent_path() / "../../configs/throughput.jsonl");
    }
    candidates.push_back("configs/throughput.jsonl");
    for (const fs::path& p : candidates)
        if (fs::is_regular_file(p, ec)) return p.lexically_normal();
    return std::nullopt;
}

ThroughputEstimate estimate_throughput(const std::vector<ThroughputRow>& all, const std::string& device,
                                       const std::string& card, double fpt, int world, int threads,
                                       const std::string& unit) {
    ThroughputEstimate e;
    // The card: the named one, else the one measured last (dates are ISO, so they sort as text).
    const ThroughputRow* latest = nullptr;
    for (const ThroughputRow& r : all) {
        if (r.device != device || (!card.empty() && r.card.find(card) == std::string::npos)) continue;
        if (!latest || r.date >= latest->date) latest = &r;
    }
    if (!latest) return e;
    e.card = latest->card;
    std::vector<const ThroughputRow*> rows;
    for (const ThroughputRow& r : all)
        if (r.device == device && r.card == e.card) rows.push_back(&r);

    const std::vector<Point> all_ones = points(rows, 1);
    if (all_ones.empty()) return e;  // only multi-rank rows: no per-rank rate to scale
    // The per-rank rate comes from rows of one thread count: the job's if measured, else the largest.
    int use_threads = 0;
    for (const Point& p : all_ones) use_threads = std::max(use_threads, p.threads);
    for (const Point& p : all_ones)
        if (threads > 0 && p.threads == threads) use_threads = threads;
    std::vector<Point> ones;
    for (const Point& p : all_ones)
        if (p.threads == use_threads) ones.push_back(p);
    e.threads_per_rank = use_threads;
    e.measured = true;
    auto use_lines = [&](const std::vector<int>& l) { e.rows_used.insert(e.rows_used.end(), l.begin(), l.end()); };

    // Per-rank rate: achieved FLOP/s, log-log interpolated in model size.
    const auto hi =
        std::lower_bound(ones.begin(), ones.end(), fpt, [](const Point& p, double f) { return p.fpt < f; });
    if (hi != ones.end() && same_model(hi->fpt, fpt)) {
        e.tokens_per_s_rank = hi->tps;
        e.rate_basis = "measured for this model size";
        use_lines(hi->lines);
    } else if (hi == ones.begin() || hi == ones.end()) {
        const Point& p = hi == ones.end() ? ones.back() : ones.front();
        e.tokens_per_s_rank = p.tps * p.fpt / fpt;
        e.rate_basis = fmt::format("achieved FLOP/s of the nearest measured model ({:.3g} FLOP/{}), outside the "
                                   "measured range",
                                   p.fpt, unit);
        use_lines(p.lines);
    } else {
        const Point& a = *(hi - 1);
        const Point& b = *hi;
        const double w = std::log(fpt / a.fpt) / std::log(b.fpt / a.fpt);
        const double flops = std::exp((1 - w) * std::log(a.tps * a.fpt) + w * std::log(b.tps * b.fpt));
        e.tokens_per_s_rank = flops / fpt;
        e.rate_basis = fmt::format("achieved FLOP/s interpolated (log-log) between measured models of {:.3g} and "
                                   "{:.3g} FLOP/{}",
                                   a.fpt, b.fpt, unit);
        use_lines(a.lines);
        use_lines(b.lines);
    }
    if (world <= 1) {
        e.efficiency_basis = "one rank";
        return e;
    }

    // Efficiency by world size, each from the measured model nearest (in log size) to this one. A row at
    // W is divided by W x the world-size-1 rows of the same model and threads per rank, taken from the same
    // command (the same benchmark run) when there are such rows, else from every run.
    struct Pair {
        double eff;
        std::vector<int> lines;
    };
    std::map<int, std::vector<Pair>> by_world;
    std::map<int, double> best_dist;
    for (const ThroughputRow* r : rows) {
        if (r->world_size < 2) continue;
        std::vector<const ThroughputRow*> base, base_same_cmd;
        for (const ThroughputRow* q : rows) {
            if (q->world_size != 1 || !same_model(q->flops_per_token, r->flops_per_token) ||
                q->threads_per_rank != r->threads_per_rank)
                continue;
            base.push_back(q);
            if (q->command == r->command) base_same_cmd.push_back(q);
        }
        if (base.empty()) continue;
        const auto& use_base = base_same_cmd.empty() ? base : base_same_cmd;
        const double dist = std::abs(std::log(r->flops_per_token / fpt));
        auto bd = best_dist.find(r->world_size);
        if (bd != best_dist.end() && dist > bd->second + 1e-12) continue;
        if (bd == best_dist.end() || dist < bd->second - 1e-12) by_world[r->world_size].clear();
        best_dist[r->world_size] = dist;
        std::vector<double> t;
        Pair pr{0, {r->line}};
        for (const ThroughputRow* q : use_base) {
            t.push_back(q->tokens_per_s);
            pr.lines.push_back(q->line);
        }
        pr.eff = r->tokens_per_s / (r->world_size * median(t));
        by_world[r->world_size].push_back(pr);
    }
    std::map<int, std::pair<double, std::vector<int>>> eff;  // W -> (median efficiency, lines)
    for (auto& [W, pairs] : by_world) {
        std::vector<double> v;
        std::vector<int> lines;
        for (const Pair& pr : pairs) {
            v.push_back(pr.eff);
            lines.insert(lines.end(), pr.lines.begin(), pr.lines.end());
        }
        eff[W] = {median(v), lines};
    }
    if (eff.empty()) {
        e.efficiency = 1;
        e.efficiency_basis =
            "not measured: no multi-rank row of this card pairs with a world-size-1 row of the same model and "
            "threads, so perfect scaling is assumed";
        return e;
    }
    if (auto it = eff.find(world); it != eff.end()) {
        e.efficiency = it->second.first;
        e.efficiency_basis = fmt::format("measured at world size {}", world);
        use_lines(it->second.second);
    } else if (world > eff.rbegin()->first) {
        const auto& [wmax, v] = *eff.rbegin();
        // Same efficiency lost per doubling as measured from 1 to wmax.
        e.efficiency = std::pow(v.first, std::log2(world) / std::log2(wmax));
        e.efficiency_basis = fmt::format("extrapolated from world size {} (efficiency {:.3f}) at the same loss per "
                                         "doubling",
                                         wmax, v.first);
        use_lines(v.second);
    } else {
        // Between 1 (efficiency 1) or a measured size below and the next measured size above.
        auto above = eff.upper_bound(world);
        double w0 = 1, e0 = 1;
        if (above != eff.begin()) {
            auto below = std::prev(above);
            w0 = below->first;
            e0 = below->second.first;
            use_lines(below->second.second);
        }
        const double t = (std::log2(world) - std::log2(w0)) / (std::log2(above->first) - std::log2(w0));
        e.efficiency = e0 + t * (above->second.first - e0);
        e.efficiency_basis = fmt::format("interpolated in log2(world size) between {} and {}", w0, above->first);
        use_lines(above->second.second);
    }
    std::sort(e.rows_used.begin(), e.rows_used.end());
    e.rows_used.erase(std::unique(e.rows_used.begin(), e.rows_used.end()), e.rows_used.end());
    return e;
}

}  // namespace llmt::server
