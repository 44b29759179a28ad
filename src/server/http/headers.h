// Header fields as received or to be sent, in order; names compare case-insensitively (RFC 9110 5.1).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmt::server::http {

bool iequals(std::string_view a, std::string_view b);

class Headers {
public:
    void add(std::string name, std::string value) { fields_.emplace_back(std::move(name), std::move(value)); }
    // Replaces every field of that name with one.
    void set(const std::string& name, std::string value);
    bool has(std::string_view name) const { return find(name) != nullptr; }
    // The first field's value, or nullptr.
    const std::string* find(std::string_view name) const;
    size_t count(std::string_view name) const;
    const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }

private:
    std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace llmt::server::http
