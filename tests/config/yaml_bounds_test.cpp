// YAML bounds: alias expansion and node counts, one document only, checked before the tree is walked;
// numbers that overflow refused naming the key, in the file and in --set values.
#include "config/yaml_bounds.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "config/loader.h"
#include "support/hostile_input.h"

namespace llmt::config {
namespace {

using testing::yaml_alias_bomb;

std::string issues_text(const std::string& yaml, const std::vector<std::string>& sets = {}) {
    try {
        load_config_string(yaml, "t.yaml", sets);
    } catch (const ConfigValidationError& e) {
        std::string s;
        for (const auto& i : e.issues()) s += i.where + " | " + i.key + " | " + i.message + "\n";
        return s;
    }
    return "(loaded)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(YamlBounds, AliasBombIsRefusedAtTheNodeLimit) {
    const std::string bomb = yaml_alias_bomb();
    EXPECT_LT(bomb.size(), 600u);
    const auto issue = find_yaml_bounds_issue(bomb);
    ASSERT_TRUE(issue);
    EXPECT_TRUE(contains(issue->message, "expands to more than 100000 nodes")) << issue->message;
    EXPECT_GT(issue->line, 1);
}

TEST(YamlBounds, AliasBombConfigIsRefusedQuickly) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string msg = issues_text("run: {name: x}\n" + yaml_alias_bomb());
    EXPECT_LT(seconds_since(t0), 2.0);
    EXPECT_TRUE(contains(msg, "expands to more than 100000 nodes")) << msg;
    EXPECT_TRUE(contains(msg, "t.yaml:")) << msg;
}

TEST(YamlBounds, AliasCountLimit) {
    std::string s = "a: &a 1\nb: [";
    for (int i = 0; i < 1001; ++i) s += (i ? ", *a" : "*a");
    s += "]\n";
    const auto issue = find_yaml_bounds_issue(s);
    ASSERT_TRUE(issue);
    EXPECT_TRUE(contains(issue->message, "more than 1000 aliases")) << issue->message;
}

TEST(YamlBounds, ModestAliasesPass) {
    EXPECT_FALSE(find_yaml_bounds_issue(yaml_alias_bomb(4)));  // 9^4 = 6561 nodes
    EXPECT_FALSE(find_yaml_bounds_issue("---\na: 1\n...\n"));
    EXPECT_FALSE(find_yaml_bounds_issue(""));
}

TEST(YamlBounds, ExpansionCountsNestedCollections) {
    // Each level holds one collection per alias; the count must include what is inside them.
    std::string s = "a0: &a0 [[[[x, x, x, x, x, x, x, x, x, x]]]]\n";
    s += "a1: &a1 [" + std::string("*a0, ") + "*a0]\n";
    YamlLimits small{30, 100};
    EXPECT_TRUE(find_yaml_bounds_issue(s, small));  // 14 + 1 + 2*14 + ... > 30
    EXPECT_FALSE(find_yaml_bounds_issue(s, {60, 100}));
}

TEST(YamlBounds, SecondDocumentIsAnErrorNamingItsLine) {
    const std::string msg = issues_text("run: {name: x}\n---\nrun: {name: y}\n");
    EXPECT_TRUE(contains(msg, "t.yaml:2:1")) << msg;  // the '---' line
    EXPECT_TRUE(contains(msg, "a second YAML document")) << msg;
    // A leading '---' is one document.
    const auto issue = find_yaml_bounds_issue("---\nrun: {name: x}\n");
    EXPECT_FALSE(issue) << issue->message;
}

TEST(YamlBounds, SetValuesAreBoundedToo) {
    const std::string value = testing::yaml_alias_bomb_flow();
    const auto t0 = std::chrono::steady_clock::now();
    const std::string msg = issues_text("run: {name: x}\n", {"data.paths=" + value});
    EXPECT_LT(seconds_since(t0), 2.0);
    EXPECT_TRUE(contains(msg, "data.paths")) << msg;
    EXPECT_TRUE(contains(msg, "expands to more than")) << msg;
}

TEST(YamlBounds, NumbersThatOverflowNameTheKey) {
    for (const char* bad : {"1e400", "-1e400", "99999999999999999999999"}) {
        SCOPED_TRACE(bad);
        const std::string msg = issues_text(std::string("trainer: {max_steps: ") + bad + "}\n");
        EXPECT_TRUE(contains(msg, "trainer.max_steps")) << msg;
        EXPECT_TRUE(contains(msg, "beyond the range") || contains(msg, "limited to 2^53")) << msg;
        const std::string set = issues_text("run: {name: x}\n", {std::string("trainer.max_steps=") + bad});
        EXPECT_TRUE(contains(set, "trainer.max_steps")) << set;
        if (std::string(bad).find('e') == std::string::npos) continue;  // 1e23 is a fine float
        const std::string lr = issues_text(std::string("trainer: {lr: ") + bad + "}\n");
        EXPECT_TRUE(contains(lr, "trainer.lr")) << lr;
        EXPECT_TRUE(contains(lr, "beyond the range of a 64-bit float")) << lr;
        const std::string set_lr = issues_text("run: {name: x}\n", {std::string("trainer.lr=") + bad});
        EXPECT_TRUE(contains(set_lr, "trainer.lr")) << set_lr;
    }
}

}  // namespace
}  // namespace llmt::config
