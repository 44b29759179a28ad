#include "cli/did_you_mean.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <numeric>
#include <optional>

#include "core/error.h"

namespace llmt::cli {

std::size_t edit_distance(const std::string& a, const std::string& b) {
    // Three rows of the dynamic programme: an adjacent transposition ("trian") is one edit.
    std::vector<std::size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
    std::iota(prev.begin(), prev.end(), 0);
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                cur[j] = std::min(cur[j], prev2[j - 2] + 1);
        }
        std::swap(prev2, prev);
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

std::string closest_name(const std::string& word, const std::vector<std::string>& candidates) {
    const std::size_t allowed = std::max<std::size_t>(1, word.size() / 3);
    std::string best;
    std::size_t best_d = allowed + 1;
    for (const auto& c : candidates) {
        std::size_t d = edit_distance(word, c);
        if (d > allowed && word.size() >= 3 && c.rfind(word, 0) == 0) d = allowed;  // a prefix: --conf
        if (d < best_d) best = c, best_d = d;
    }
    return best;
}

namespace {

std::vector<const CLI::App*> subcommands_of(const CLI::App& app) {
    return app.get_subcommands([](const CLI::App* s) { return !s->get_name().empty(); });
}

const CLI::App* find_subcommand(const CLI::App& app, const std::string& name) {
    for (const auto* s : subcommands_of(app))
        if (s->check_name(name)) return s;
    return nullptr;
}

std::string command_path(const std::vector<std::string>& path) {
    std::string out = "llmtrain";
    for (const auto& p : path) out += " " + p;
    return out;
}

std::string suggestion(const std::string& word, const std::vector<std::string>& names) {
    const std::string near = closest_name(word, names);
    return near.empty() ? std::string() : fmt::format("; did you mean '{}'?", near);
}

[[noreturn]] void unknown_subcommand(const CLI::App& app, const std::string& word,
                                     const std::vector<std::string>& path) {
    std::vector<std::string> names;
    for (const auto* s : subcommands_of(app)) names.push_back(s->get_name());
    std::string hint = suggestion(word, names);
    if (hint.empty()) hint = fmt::format(" (commands: {})", fmt::join(names, ", "));
    throw UsageError(fmt::format("unknown command '{}' for '{}'{}", word, command_path(path), hint));
}

[[noreturn]] void unknown_option(const CLI::App& app, const std::string& word, const std::vector<std::string>& path) {
    std::vector<std::string> names;
    for (const auto* o : app.get_options()) {
        for (const auto& l : o->get_lnames()) names.push_back("--" + l);
        for (const auto& s : o->get_snames()) names.push_back("-" + s);
    }
    std::string hint = suggestion(word, names);
    if (hint.empty()) hint = fmt::format(" (see '{} --help')", command_path(path));
    throw UsageError(fmt::format("unknown option '{}' for '{}'{}", word, command_path(path), hint));
}

bool looks_like_number(const std::string& s) {
    return s.size() > 1 && s[0] == '-' && (std::isdigit(static_cast<unsigned char>(s[1])) || s[1] == '.');
}

// An option token this check judges: --long[=v] or a lone -x; combined short flags and values that look
// like negative numbers are left to CLI11.
std::optional<std::string> option_name(const std::string& tok) {
    if (tok.rfind("--", 0) == 0 && tok.size() > 2) return tok.substr(0, tok.find('='));
    if (tok.size() == 2 && tok[0] == '-' && tok[1] != '-' && !looks_like_number(tok)) return tok;
    return std::nullopt;
}

}  // namespace

void check_command_names(const CLI::App& app, const std::vector<std::string>& args) {
    const CLI::App* cur = &app;
    std::vector<std::string> path;
    bool expect_subcommand = !subcommands_of(app).empty();
    bool value_next = false;  // the token after `--opt` (without '=') that takes a value is that value
    for (const auto& tok : args) {
        if (tok == "--") return;
        if (value_next) {
            value_next = false;
            continue;
        }
        if (auto name = option_name(tok)) {
            const CLI::Option* opt = cur->get_option_no_throw(*name);
            if (opt == nullptr) unknown_option(*cur, *name, path);
            value_next = opt->get_type_size_max() > 0 && tok.find('=') == std::string::npos;
            expect_subcommand = false;
            continue;
        }
        if (const CLI::App* sub = find_subcommand(*cur, tok)) {
            cur = sub;
            path.push_back(sub->get_name());
            expect_subcommand = !subcommands_of(*sub).empty();
            continue;
        }
        // A word right after a command that only takes subcommands is a mistyped subcommand.
        if (expect_subcommand && cur->get_require_subcommand_min() > 0 && !looks_like_number(tok))
            unknown_subcommand(*cur, tok, path);
        expect_subcommand = false;
    }
}

}  // namespace llmt::cli
