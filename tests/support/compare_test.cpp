// support/compare.h: two empty sequences or two of different sizes are refused with a clear failure, and
// every comparison helper in tests/ starts with it: a function whose name says it compares (same, equal,
// close, match, near, compare, rel, err, bits, diff) and that takes two sequences (std::vector or
// std::span) must call support:: itself or a helper that does; otherwise it would pass on two empty inputs.
#include "support/compare.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace llmt::support {
namespace {

namespace fs = std::filesystem;

TEST(Comparable, RefusesTwoEmptySequences) {
    const auto r = comparable(std::vector<double>{}, std::vector<double>{});
    EXPECT_FALSE(r);
    EXPECT_NE(std::string(r.message()).find("both sequences are empty"), std::string::npos) << r.message();
}

TEST(Comparable, RefusesDifferentSizes) {
    const auto r = comparable(std::vector<float>{1.f, 2.f}, std::vector<double>{1.0});
    EXPECT_FALSE(r);
    EXPECT_NE(std::string(r.message()).find("sizes differ: 2 vs 1"), std::string::npos) << r.message();
    EXPECT_FALSE(comparable(std::vector<int>{}, std::vector<int>{7}));
}

TEST(Comparable, AcceptsEqualSizes) {
    EXPECT_TRUE(comparable(std::vector<int>{1, 2, 3}, std::vector<double>{4, 5, 6}));
}

TEST(ExpectComparable, FailsTheTestOnTwoEmptyInputs) {
    EXPECT_NONFATAL_FAILURE(expect_comparable(std::vector<double>{}, std::vector<double>{}, "the losses"),
                            "both sequences are empty");
    EXPECT_NONFATAL_FAILURE(expect_comparable(std::vector<double>{}, std::vector<double>{}, "the losses"),
                            "the losses");
    EXPECT_GT(not_comparable(), 1e300);
}

// ---- the scan ----------------------------------------------------------------------------------------

struct Helper {
    std::string where, name, body;
};

// The top-level parameters of "a, std::vector<int> b, const std::map<int, int>& c".
std::vector<std::string> split_params(const std::string& params) {
    std::vector<std::string> out(1);
    int depth = 0;
    for (char c : params) {
        if (c == '<' || c == '(' || c == '[' || c == '{') ++depth;
        if (c == '>' || c == ')' || c == ']' || c == '}') --depth;
        if (c == ',' && depth == 0)
            out.emplace_back();
        else
            out.back() += c;
    }
    return out;
}

// Function definitions that start at column 0 of `text`, whose name says they compare and that take two
// sequences. A definition's head may span lines; its body is the balanced braces after it.
std::vector<Helper> comparison_helpers(const std::string& text, const std::string& file) {
    static const std::regex kName(
        R"((^|_)(same|equal|equals|close|match|matches|near|compare|rel|err|bits|diff)(_|$))");
    static const std::regex kHead(R"(^(?:template\s*<[^>]*>\s*)?[A-Za-z_][\w:<>,\s\*&]*?\b([a-z_][a-z0-9_]*)\s*\()");
    static const std::regex kSequence(R"(\b(vector|span)\s*<)");
    std::vector<Helper> out;
    std::set<size_t> bodies;  // a template head and the line after it reach the same body once
    size_t line_start = 0;
    int line_no = 1;
    while (line_start < text.size()) {
        const size_t eol = std::min(text.find('\n', line_start), text.size());
        const char first = text[line_start];
        std::smatch m;
        const std::string rest = text.substr(line_start, std::min<size_t>(text.size() - line_start, 2000));
        if (first != ' ' && first != '/' && first != '#' && first != '}' &&
            std::regex_search(rest, m, kHead, std::regex_constants::match_continuous) &&
            std::regex_search(m[1].str(), kName)) {
            // The parameter list: from the '(' the head ended with to its matching ')'.
            size_t p = line_start + static_cast<size_t>(m.length(0));
            int depth = 1;
            const size_t params_begin = p;
            while (p < text.size() && depth > 0) {
                if (text[p] == '(') ++depth;
                if (text[p] == ')') --depth;
                ++p;
            }
            const std::string params = text.substr(params_begin, p - 1 - params_begin);
            const size_t brace = text.find_first_of("{;", p);
            int sequences = 0;
            for (const auto& param : split_params(params)) sequences += std::regex_search(param, kSequence) ? 1 : 0;
            if (brace != std::string::npos && text[brace] == '{' && sequences >= 2 && bodies.insert(brace).second) {
                size_t q = brace + 1;
                depth = 1;
                while (q < text.size() && depth > 0) {
                    if (text[q] == '{') ++depth;
                    if (text[q] == '}') --depth;
                    ++q;
                }
                out.push_back({file + ":" + std::to_string(line_no), m[1].str(), text.substr(brace, q - brace)});
            }
        }
        line_start = eol + 1;
        ++line_no;
    }
    return out;
}

// The helpers that neither call support:: nor a helper that does (every definition of that name does).
std::vector<std::string> unchecked(const std::vector<Helper>& helpers) {
    std::map<std::string, std::vector<const Helper*>> by_name;
    for (const auto& h : helpers) by_name[h.name].push_back(&h);
    std::set<const Helper*> ok;
    for (bool grew = true; grew;) {
        grew = false;
        for (const auto& h : helpers) {
            if (ok.count(&h)) continue;
            bool good = h.body.find("support::") != std::string::npos;
            for (const auto& [name, defs] : by_name) {
                if (good) break;
                if (name == h.name || !std::regex_search(h.body, std::regex("\\b" + name + "\\s*\\("))) continue;
                bool all = true;
                for (const Helper* d : defs) all = all && ok.count(d) > 0;
                good = all;
            }
            if (good) grew = ok.insert(&h).second || grew;
        }
    }
    std::vector<std::string> out;
    for (const auto& h : helpers)
        if (!ok.count(&h)) out.push_back(h.where + ": " + h.name);
    return out;
}

TEST(ComparisonHelpers, TheScanFindsAHelperWithoutTheCheck) {
    const std::string text =
        "double rel_err(const std::vector<float>& a,\n"
        "               const std::vector<float>& b) {\n"
        "    double e = 0;\n"
        "    for (size_t i = 0; i < a.size(); ++i) e += a[i] - b[i];\n"
        "    return e;\n"
        "}\n"
        "void expect_close(const std::vector<float>& got, const std::vector<float>& want) {\n"
        "    EXPECT_LT(rel_err(got, want), 1e-6);\n"
        "}\n"
        "bool same_bits(const std::vector<float>& a, std::span<const float> b) {\n"
        "    return support::expect_comparable(a, b, \"x\") && a[0] == b[0];\n"
        "}\n"
        "void expect_same_ids(const std::vector<int>& got, const std::vector<int>& want) {\n"
        "    EXPECT_TRUE(same_bits(got, want));\n"
        "}\n"
        "std::vector<float> minus(const std::vector<float>& a, const std::vector<float>& b) { return a; }\n"
        "void expect_near(const std::vector<float>& got, float want) { EXPECT_EQ(got[0], want); }\n";
    const auto helpers = comparison_helpers(text, "planted.cpp");
    ASSERT_EQ(helpers.size(), 4u);  // not minus (its name), not expect_near (one sequence)
    EXPECT_EQ(helpers[0].where, "planted.cpp:1");
    const std::vector<std::string> want = {"planted.cpp:1: rel_err", "planted.cpp:7: expect_close"};
    EXPECT_EQ(unchecked(helpers), want);
}

TEST(ComparisonHelpers, EveryHelperInTestsRefusesEmptyInputs) {
    std::vector<Helper> helpers;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(LLMT_SOURCE_DIR) / "tests")) {
        const std::string ext = e.path().extension().string();
        if (!e.is_regular_file() || (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh")) continue;
        std::ifstream in(e.path());
        std::stringstream text;
        text << in.rdbuf();
        const std::string rel = fs::relative(e.path(), LLMT_SOURCE_DIR).string();
        for (auto& h : comparison_helpers(text.str(), rel)) helpers.push_back(std::move(h));
    }
    EXPECT_GE(helpers.size(), 10u) << "the scan found few comparison helpers: is LLMT_SOURCE_DIR the checkout?";
    for (const auto& u : unchecked(helpers))
        ADD_FAILURE() << u << " compares two sequences without support/compare.h (passes on two empty inputs)";
}

}  // namespace
}  // namespace llmt::support
