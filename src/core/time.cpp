#include "core/time.h"

#include <ctime>

namespace llmt {
namespace {
std::tm utc_now() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    return tm;
}
}  // namespace

std::string utc_iso8601_now() {
    std::tm tm = utc_now();
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string utc_compact_now() {
    std::tm tm = utc_now();
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
    return buf;
}

}  // namespace llmt
