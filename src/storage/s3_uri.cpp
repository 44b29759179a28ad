#include "storage/s3_uri.h"

#include <fmt/format.h>

#include "core/error.h"

namespace llmt::storage {

S3Uri S3Uri::join(std::string_view rel) const {
    while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
    S3Uri u = *this;
    if (!u.key.empty() && u.key.back() != '/' && !rel.empty()) u.key += '/';
    u.key += rel;
    return u;
}

bool is_s3_uri(std::string_view s) { return s.rfind("s3://", 0) == 0; }

S3Uri parse_s3_uri(std::string_view s, std::string_view what) {
    if (!is_s3_uri(s))
        throw InputError(fmt::format("{}: '{}' is not an s3:// URI (expected s3://bucket/prefix)", what, s));
    std::string_view rest = s.substr(5);
    const auto slash = rest.find('/');
    S3Uri u{std::string(rest.substr(0, slash)),
            slash == std::string_view::npos ? "" : std::string(rest.substr(slash + 1))};
    bool ok = u.bucket.size() >= 3 && u.bucket.size() <= 63;
    for (char c : u.bucket) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-');
    if (!ok)
        throw InputError(fmt::format("{}: '{}' has bucket '{}'; expected 3-63 characters of a-z, 0-9, '.' and '-'",
                                     what, s, u.bucket));
    if (u.key.find("//") != std::string::npos || u.key.find("..") != std::string::npos)
        throw InputError(fmt::format("{}: '{}' has an empty or '..' path segment", what, s));
    return u;
}

}  // namespace llmt::storage
