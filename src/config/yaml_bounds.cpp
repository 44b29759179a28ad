// find_yaml_bounds_issue: a yaml-cpp EventHandler that counts nodes as they would expand, aborting
// with the first broken limit, and a second pass that only looks for a second document's start.
#include "config/yaml_bounds.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <sstream>
#include <vector>

namespace llmt::config {

namespace {

// Thrown from inside the handler to stop the parser at the first broken limit.
struct LimitBroken {
    YamlBoundsIssue issue;
};

YamlBoundsIssue issue_at(const YAML::Mark& m, std::string message) {
    return {m.is_null() ? 0 : m.line + 1, m.is_null() ? 0 : m.column + 1, std::move(message)};
}

class ExpansionCounter : public YAML::EventHandler {
public:
    explicit ExpansionCounter(const YamlLimits& limits) : limits_(limits) {}

    void OnDocumentStart(const YAML::Mark& m) override {
        if (++documents_ > 1)
            throw LimitBroken{issue_at(m, "a second YAML document starts here (after '---'); a config is one "
                                          "document: remove the '---' line and what follows, or merge the two")};
    }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark& m, YAML::anchor_t anchor) override { leaf(m, anchor); }
    void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor, const std::string&) override {
        leaf(m, anchor);
    }
    void OnAlias(const YAML::Mark& m, YAML::anchor_t anchor) override {
        if (++aliases_ > limits_.max_aliases)
            throw LimitBroken{issue_at(m, fmt::format("more than {} aliases (*name); a config needs a few at most",
                                                      limits_.max_aliases))};
        count(m, anchor < sizes_.size() ? sizes_[anchor] : 1);
    }
    void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor,
                         YAML::EmitterStyle::value) override {
        open(m, anchor);
    }
    void OnSequenceEnd() override { close(); }
    void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor,
                    YAML::EmitterStyle::value) override {
        open(m, anchor);
    }
    void OnMapEnd() override { close(); }

private:
    struct Open {
        YAML::anchor_t anchor;
        std::size_t nodes;  // expanded nodes inside, this one included
    };

    // Adds n expanded nodes to the document and to the innermost open collection.
    void count(const YAML::Mark& m, std::size_t n) {
        total_ += n;
        if (total_ > limits_.max_nodes)
            throw LimitBroken{issue_at(m, fmt::format("expands to more than {} nodes (aliases count as copies of "
                                                      "what they name); a config has a few hundred",
                                                      limits_.max_nodes))};
        if (!open_.empty()) open_.back().nodes += n;
    }
    void remember(YAML::anchor_t anchor, std::size_t n) {
        if (anchor == YAML::NullAnchor) return;
        if (sizes_.size() <= anchor) sizes_.resize(anchor + 1, 1);
        sizes_[anchor] = n;
    }
    void leaf(const YAML::Mark& m, YAML::anchor_t anchor) {
        count(m, 1);
        remember(anchor, 1);
    }
    void open(const YAML::Mark& m, YAML::anchor_t anchor) {
        count(m, 1);
        open_.push_back({anchor, 1});
    }
    void close() {
        const Open done = open_.back();
        open_.pop_back();
        // The enclosing collection counted this one's own node at open(); now add what was inside.
        if (!open_.empty()) open_.back().nodes += done.nodes - 1;
        remember(done.anchor, done.nodes);
    }

    const YamlLimits& limits_;
    std::vector<Open> open_;
    std::vector<std::size_t> sizes_;  // by anchor id: expanded nodes of the anchored node
    std::size_t total_ = 0;
    std::size_t aliases_ = 0;
    int documents_ = 0;
};

}  // namespace

std::optional<YamlBoundsIssue> find_yaml_bounds_issue(std::string_view text, const YamlLimits& limits) {
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    ExpansionCounter counter(limits);
    try {
        while (parser.HandleNextDocument(counter)) {
        }
    } catch (const LimitBroken& e) {
        return e.issue;
    }
    return std::nullopt;
}

}  // namespace llmt::config
