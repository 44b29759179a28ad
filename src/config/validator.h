// The loader's collector of config problems: each with its key, where it was written (file:line:col,
// --set, or the default) and what was expected; thrown together, in file order, as one
// ConfigValidationError. Shared by loader.cpp and cross_checks.cpp; not part of the config API.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/loader.h"

namespace llmt::config {

// Collects issues while validating one config.
class Validator {
public:
    explicit Validator(std::string source) : source_(std::move(source)) {}

    void add(std::string key, std::string where, std::string message) {
        issues_.push_back({std::move(key), std::move(where), std::move(message)});
    }
    std::string where(const YAML::Node& n) const {
        const auto m = n.Mark();
        if (m.is_null()) return source_;
        return fmt::format("{}:{}:{}", source_, m.line + 1, m.column + 1);
    }
    std::string where_line(int line, int col) const { return fmt::format("{}:{}:{}", source_, line, col); }
    bool ok() const { return issues_.empty(); }
    // Throws every issue, in file order (line, then column); --set and whole-file issues last.
    [[noreturn]] void raise() {
        auto pos = [this](const ConfigIssue& i) {
            long line = 1L << 40, col = 0;
            if (i.where.rfind(source_ + ":", 0) == 0)
                std::sscanf(i.where.c_str() + source_.size() + 1, "%ld:%ld", &line, &col);
            return std::pair{line, col};
        };
        std::stable_sort(issues_.begin(), issues_.end(),
                         [&](const ConfigIssue& a, const ConfigIssue& b) { return pos(a) < pos(b); });
        throw ConfigValidationError(source_, issues_);
    }
    const std::string& source() const { return source_; }
    std::size_t count() const { return issues_.size(); }
    // Drops the issues from index `first` on that name one of `keys` (as their key or in their message):
    // checks that read a key whose value was refused compared its default, not what the user wrote.
    void drop_mentioning(std::size_t first, const std::set<std::string>& keys) {
        auto mentions = [&](const ConfigIssue& i) {
            for (const auto& k : keys)
                if (i.key == k || i.message.find(k) != std::string::npos) return true;
            return false;
        };
        issues_.erase(std::remove_if(issues_.begin() + static_cast<std::ptrdiff_t>(first), issues_.end(), mentions),
                      issues_.end());
    }

private:
    std::string source_;
    std::vector<ConfigIssue> issues_;
};

}  // namespace llmt::config
