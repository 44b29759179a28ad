// parse_json: limits (size, depth), duplicate keys, number overflow, and messages that name where
// (byte, line, column, key path) without quoting the input; describe_json's bounded descriptions.
#include "core/json_parse.h"

#include <gtest/gtest.h>

#include <string>

#include "core/json_describe.h"

namespace llmt {
namespace {

// The message of the JsonParseError that parsing `text` throws, or "(parsed)".
std::string error_of(const std::string& text, const JsonLimits& limits = {}) {
    try {
        parse_json(text, "input", limits);
    } catch (const JsonParseError& e) {
        return e.what();
    }
    return "(parsed)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(JsonParse, ParsesOrdinaryJson) {
    const auto j = parse_json(R"( {"a": [1, -2, 3.5, "x", true, null], "b": {"c": 18446744073709551615}} )", "in");
    EXPECT_EQ(j["a"][1].get<int64_t>(), -2);
    EXPECT_EQ(j["b"]["c"].get<uint64_t>(), UINT64_MAX);
    EXPECT_DOUBLE_EQ(j["a"][2].get<double>(), 3.5);
}

TEST(JsonParse, HundredThousandNestedBracketsAreRefusedAtTheLimit) {
    const std::string deep(100000, '[');
    const std::string msg = error_of(deep);
    EXPECT_TRUE(contains(msg, "nested deeper than 64 levels")) << msg;
    EXPECT_TRUE(contains(msg, "at byte 65")) << msg;
    // Exactly at the limit is fine.
    EXPECT_NO_THROW(parse_json(std::string(64, '[') + std::string(64, ']'), "in"));
    EXPECT_TRUE(contains(error_of(std::string(65, '[') + std::string(65, ']')), "nested deeper"));
}

TEST(JsonParse, DeepObjectsToo) {
    std::string s;
    for (int i = 0; i < 5000; ++i) s += "{\"k\":";
    const std::string msg = error_of(s);
    EXPECT_TRUE(contains(msg, "nested deeper than 64 levels")) << msg;
}

TEST(JsonParse, SizeLimit) {
    const std::string msg = error_of("[1, 2, 3]", {4, 64, true});
    EXPECT_TRUE(contains(msg, "9 bytes, over the 4-byte limit")) << msg;
}

TEST(JsonParse, DuplicateKeysNameTheKeyPath) {
    try {
        parse_json(R"({"config": {"trainer": {"lr": 1, "lr": 2}}})", "body");
        FAIL() << "duplicate accepted";
    } catch (const JsonParseError& e) {
        EXPECT_EQ(e.reason(), "duplicate key");
        EXPECT_EQ(e.key_path(), "config.trainer.lr");
        EXPECT_TRUE(contains(e.what(), "at key config.trainer.lr")) << e.what();
    }
    // The same key in two different objects is fine.
    EXPECT_NO_THROW(parse_json(R"([{"a": 1}, {"a": 2}])", "in"));
}

TEST(JsonParse, NumberOverflowIsRefusedWithTheKey) {
    try {
        parse_json(R"({"name": "x", "budget_usd": 1e400})", "body");
        FAIL() << "1e400 accepted";
    } catch (const JsonParseError& e) {
        EXPECT_EQ(e.reason(), "number does not fit a 64-bit float");
        EXPECT_EQ(e.key_path(), "budget_usd");
    }
    EXPECT_TRUE(contains(error_of("[-1e400]"), "does not fit")) << error_of("[-1e400]");
    // Integer literals beyond 64 bits are refused rather than rounded to a double.
    const std::string big = error_of(R"({"a": [0, 1, 99999999999999999999999]})");
    EXPECT_TRUE(contains(big, "integer does not fit 64 bits")) << big;
    EXPECT_TRUE(contains(big, "at key a[2]")) << big;
    EXPECT_TRUE(contains(error_of("[-9999999999999999999999]"), "integer does not fit")) << "";
    // Small exponents are fine, and so is a tiny number that underflows to 0.
    EXPECT_NO_THROW(parse_json("[1e300, 1e-400, 1.5]", "in"));
}

TEST(JsonParse, SyntaxErrorsSayWhereAndNeverQuoteTheInput) {
    const std::string secret = "admin-token-SECRET";
    // Values only: keys are named in the path unless name_keys is false (KeysCanBeLeftOutOfMessages).
    for (const std::string& text : {"{\"a\": " + secret + "}", "[\"" + secret, "{\"a\": \"" + secret + "\" 1}",
                                    "[1,\n \"" + secret + "\x01\"]", secret}) {
        const std::string msg = error_of(text);
        EXPECT_TRUE(contains(msg, "input: invalid JSON: ")) << msg;
        EXPECT_TRUE(contains(msg, "at byte ")) << msg;
        EXPECT_FALSE(contains(msg, "SECRET")) << msg;
    }
    const std::string msg = error_of("[1,\n 2,\n x]");
    EXPECT_TRUE(contains(msg, "(line 3, column 3)")) << msg;  // where the lexer stopped: after the x
    EXPECT_TRUE(contains(msg, "at key [2]")) << msg;
    EXPECT_TRUE(contains(error_of(""), "invalid JSON")) << error_of("");
    EXPECT_TRUE(contains(error_of("[1] [2]"), "invalid JSON")) << "trailing value";
}

TEST(JsonParse, KeysCanBeLeftOutOfMessages) {
    const std::string msg = error_of(R"({"secret-key": 1, "secret-key": 2})", {1 << 20, 64, false});
    EXPECT_TRUE(contains(msg, "duplicate key")) << msg;
    EXPECT_FALSE(contains(msg, "secret-key")) << msg;
    const std::string syntax = error_of(R"({"secret-key" 1})", {1 << 20, 64, false});
    EXPECT_TRUE(contains(syntax, "invalid JSON")) << syntax;
    EXPECT_FALSE(contains(syntax, "secret-key")) << syntax;
}

TEST(JsonParse, LongKeysAreCutInThePath) {
    const std::string key(1000, 'k');
    const std::string msg = error_of("{\"" + key + "\": [1e999]}");
    EXPECT_TRUE(contains(msg, std::string(64, 'k') + "...")) << msg;
    EXPECT_LT(msg.size(), 300u) << msg;
}

TEST(JsonParse, InvalidUtf8IsRefused) { EXPECT_TRUE(contains(error_of("[\"a\xff\"]"), "invalid JSON")); }

TEST(JsonParse, TryParseReturnsNulloptOnBadInput) {
    EXPECT_FALSE(try_parse_json("{\"a\": 1, \"a\": 2}"));
    EXPECT_FALSE(try_parse_json(std::string(1000, '[')));
    ASSERT_TRUE(try_parse_json("{\"step\": 3}"));
    EXPECT_EQ((*try_parse_json("{\"step\": 3}"))["step"], 3);
}

TEST(JsonDescribe, BoundedDescriptions) {
    EXPECT_EQ(describe_json(nlohmann::json::array({1, 2, 3})), "an array of 3 elements");
    EXPECT_EQ(describe_json(nlohmann::json::object({{"a", 1}})), "an object of 1 key");
    EXPECT_EQ(describe_json(nlohmann::json(12)), "12");
    EXPECT_EQ(describe_json(nlohmann::json(nullptr)), "null");
    EXPECT_EQ(describe_json(nlohmann::json("abc")), "\"abc\"");
    const std::string d = describe_json(nlohmann::json(std::string(10000, 'x')));
    EXPECT_TRUE(contains(d, "a string of 10000 bytes")) << d;
    EXPECT_LT(d.size(), 120u);
}

}  // namespace
}  // namespace llmt

namespace llmt {
namespace {

TEST(JsonParseOrdered, KeepsKeyOrderAndRefusesDuplicates) {
    const auto j = parse_ordered_json(R"({"b": 1, "a": {"z": [1, 2], "y": null}})", "in");
    EXPECT_EQ(j.begin().key(), "b");
    EXPECT_EQ(j["a"].begin().key(), "z");
    try {
        parse_ordered_json(R"({"a": {"z": 1, "y": 2, "z": 3}})", "in");
        FAIL() << "duplicate accepted";
    } catch (const JsonParseError& e) {
        EXPECT_EQ(e.key_path(), "a.z");
    }
    EXPECT_THROW(parse_ordered_json(std::string(1000, '['), "in"), JsonParseError);
}

}  // namespace
}  // namespace llmt
