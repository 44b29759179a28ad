// parse_train_state (train_state.h): one typed read per field.
#include "train/train_state.h"

#include <fmt/format.h>

#include <limits>
#include <string>

#include "core/error.h"

namespace llmt::train {
namespace {

class Fields {
public:
    Fields(const nlohmann::json& state, const std::filesystem::path& file) : state_(state), file_(file.string()) {
        if (!state.is_object())
            throw CheckpointError(fmt::format("'{}': expected a JSON object, found {}", file_, state.type_name()));
    }

    // nullptr when absent; throws when absent and required.
    const nlohmann::json* find(const char* name, bool required, const char* expected) const {
        auto it = state_.find(name);
        if (it != state_.end()) return &*it;
        if (required)
            throw CheckpointError(fmt::format("'{}': field \"{}\" is missing, expected {}", file_, name, expected));
        return nullptr;
    }

    [[noreturn]] void wrong(const char* name, const char* expected, const nlohmann::json& v) const {
        std::string found = v.is_number() || v.is_boolean() || v.is_null() ? v.dump() : std::string(v.type_name());
        throw CheckpointError(fmt::format("'{}': field \"{}\" must be {}, found {}", file_, name, expected, found));
    }

    std::int64_t integer(const char* name, bool required, std::int64_t fallback, std::int64_t lo, std::int64_t hi,
                         const char* expected) const {
        const nlohmann::json* v = find(name, required, expected);
        if (!v) return fallback;
        if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<std::uint64_t>() >
                                                                       static_cast<std::uint64_t>(hi)))
            wrong(name, expected, *v);
        const std::int64_t x = v->get<std::int64_t>();
        if (x < lo || x > hi) wrong(name, expected, *v);
        return x;
    }

    double number(const char* name, double fallback, const char* expected) const {
        const nlohmann::json* v = find(name, false, expected);
        if (!v) return fallback;
        if (!v->is_number() || !(v->get<double>() >= 0)) wrong(name, expected, *v);
        return v->get<double>();
    }

    const nlohmann::json& object(const char* name) const {
        const nlohmann::json* v = find(name, true, "an object");
        if (!v->is_object()) wrong(name, "an object", *v);
        return *v;
    }

    std::optional<double> number_or_null(const char* name) const {
        const nlohmann::json* v = find(name, false, "a number or null");
        if (!v || v->is_null()) return std::nullopt;
        if (!v->is_number()) wrong(name, "a number or null", *v);
        return v->get<double>();
    }

private:
    const nlohmann::json& state_;
    std::string file_;
};

}  // namespace

TrainState parse_train_state(const nlohmann::json& state, const std::filesystem::path& file) {
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    const Fields f(state, file);
    TrainState s;
    s.step = f.integer("step", true, 0, 0, kMax, "an integer >= 0");
    s.tokens = f.integer("tokens", false, 0, 0, kMax, "an integer >= 0");
    s.loader = f.object("loader");
    s.best_val_loss = f.number_or_null("best_val_loss");
    s.world_size = static_cast<int>(f.integer("world_size", false, 1, 1, 1 << 20, "an integer >= 1"));
    s.zero_stage = static_cast<int>(f.integer("zero_stage", false, 0, 0, 3, "0, 1 or 3"));
    if (s.zero_stage == 2) f.wrong("zero_stage", "0, 1 or 3", state.at("zero_stage"));  // no stage 2 is built
    s.wall_s = f.number("wall_s", 0, "a number >= 0");
    s.config = f.object("config");
    return s;
}

}  // namespace llmt::train
