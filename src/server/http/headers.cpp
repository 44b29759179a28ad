// Case-insensitive header lookup; see headers.h.
#include "server/http/headers.h"

#include <algorithm>

namespace llmt::server::http {

namespace {
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
}  // namespace

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

void Headers::set(const std::string& name, std::string value) {
    std::erase_if(fields_, [&](const auto& f) { return iequals(f.first, name); });
    add(name, std::move(value));
}

const std::string* Headers::find(std::string_view name) const {
    for (const auto& f : fields_)
        if (iequals(f.first, name)) return &f.second;
    return nullptr;
}

size_t Headers::count(std::string_view name) const {
    return static_cast<size_t>(
        std::count_if(fields_.begin(), fields_.end(), [&](const auto& f) { return iequals(f.first, name); }));
}

}  // namespace llmt::server::http
