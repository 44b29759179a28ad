// Typed reading of one JSON object of a Hugging Face config.json: every error is a FormatError naming the
// file and the field (with its prefix inside a nested object, "rope_parameters.factor"), and refusals of
// values llmtrain cannot compute say why. The family files (models/gpt2.cpp, models/llama.cpp, ...) read
// their config.json fields with it.
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace llmt::models {

// Reads typed fields of one JSON object of config.json; every error names the file and the field.
class HfFields {
public:
    using json = nlohmann::json;
    HfFields(const json& obj, std::string path, std::string prefix = "")
        : obj_(obj), path_(std::move(path)), prefix_(std::move(prefix)) {}

    bool has(const char* f) const { return obj_.contains(f) && !obj_[f].is_null(); }
    std::string name(const char* f) const { return prefix_ + f; }

    [[noreturn]] void fail(const char* f, const std::string& what) const {
        throw FormatError(fmt::format("{}: `{}`: {}", path_, name(f), what));
    }
    std::string found(const char* f) const {
        std::string s = obj_[f].dump();
        return s.size() > 40 ? s.substr(0, 37) + "..." : s;
    }

    int64_t integer(const char* f, int64_t min = 1) const {
        const json& v = obj_[f];
        if (!v.is_number_integer()) fail(f, fmt::format("expected an integer, found {}", found(f)));
        const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX ? INT64_MAX : v.get<int64_t>();
        if (x < min || x > INT32_MAX) fail(f, fmt::format("expected an integer >= {} and < 2^31, found {}", min, x));
        return x;
    }
    int required_int(const char* f) const {
        if (!has(f)) fail(f, "missing (a shape field llmtrain does not guess)");
        return static_cast<int>(integer(f));
    }
    int int_or(const char* f, int def) const { return has(f) ? static_cast<int>(integer(f)) : def; }

    double number(const char* f) const {
        const json& v = obj_[f];
        if (!v.is_number() || !std::isfinite(v.get<double>()))
            fail(f, fmt::format("expected a number, found {}", found(f)));
        return v.get<double>();
    }
    double positive_or(const char* f, double def) const {
        if (!has(f)) return def;
        const double x = number(f);
        if (!(x > 0)) fail(f, fmt::format("expected a number > 0, found {}", found(f)));
        return x;
    }
    bool bool_or(const char* f, bool def) const {
        if (!has(f)) return def;
        if (!obj_[f].is_boolean()) fail(f, fmt::format("expected true or false, found {}", found(f)));
        return obj_[f].get<bool>();
    }
    std::string string_or(const char* f, std::string def) const {
        if (!has(f)) return def;
        if (!obj_[f].is_string()) fail(f, fmt::format("expected a string, found {}", found(f)));
        return obj_[f].get<std::string>();
    }
    // An int, a list of ints, or null/absent (empty).
    std::vector<int64_t> token_ids(const char* f) const {
        if (!has(f)) return {};
        const json& v = obj_[f];
        std::vector<int64_t> out;
        auto one = [&](const json& e) {
            if (!e.is_number_integer() || e.get<int64_t>() < 0)
                fail(f, fmt::format("expected a token id (an integer >= 0) or a list of them, found {}", found(f)));
            out.push_back(e.get<int64_t>());
        };
        if (v.is_array()) {
            for (const auto& e : v) one(e);
        } else {
            one(v);
        }
        return out;
    }
    // A refusal of a value llmtrain cannot compute.
    void refuse_unless(bool ok, const char* f, const std::string& why) const {
        if (!ok) fail(f, fmt::format("{} is not supported: {}", found(f), why));
    }

private:
    const json& obj_;
    std::string path_, prefix_;
};

// A float as the decimal it was written as (1e-5f -> 1e-05, not 9.999999747378752e-06): fmt prints the
// shortest decimal that reads back as the same float. For the config.json we write.
inline double hf_decimal(float f) { return std::stod(fmt::format("{}", f)); }

}  // namespace llmt::models
