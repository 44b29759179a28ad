// describe_json: bounded descriptions of caller JSON values for error messages.
#include "core/json_describe.h"

#include <fmt/format.h>

namespace llmt {

namespace {

constexpr std::size_t kMaxQuoted = 64;

std::string plural(std::size_t n, const char* noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); }

}  // namespace

std::string describe_json(const nlohmann::json& v) {
    switch (v.type()) {
        case nlohmann::json::value_t::array:
            return "an array of " + plural(v.size(), "element");
        case nlohmann::json::value_t::object:
            return "an object of " + plural(v.size(), "key");
        case nlohmann::json::value_t::string: {
            const auto& s = v.get_ref<const std::string&>();
            if (s.size() <= kMaxQuoted) return fmt::format("\"{}\"", s);
            return fmt::format("\"{}...\" (a string of {} bytes)", s.substr(0, kMaxQuoted), s.size());
        }
        case nlohmann::json::value_t::binary:
            return "binary data";
        case nlohmann::json::value_t::discarded:
            return "a discarded value";
        default:
            return v.dump();  // null, a boolean or a number: short
    }
}

}  // namespace llmt
