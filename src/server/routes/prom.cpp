// ApiMetrics: cumulative buckets as Prometheus expects (each bucket counts observations <= its bound).
#include "server/routes/prom.h"

#include <fmt/format.h>

namespace llmt::server {

std::string prom_label(const std::string& v) {
    std::string o;
    for (char c : v) {
        if (c == '\\' || c == '"')
            o += '\\', o += c;
        else if (c == '\n')
            o += "\\n";
        else
            o += c;
    }
    return o;
}

void ApiMetrics::observe(const std::string& route, const std::string& method, int status, double seconds) {
    std::lock_guard lock(mu_);
    auto& h = latency_[{route, method}];
    for (size_t i = 0; i < kBuckets.size(); ++i)
        if (seconds <= kBuckets[i]) ++h.counts[i];
    ++h.count;
    h.sum += seconds;
    ++requests_[{route, method, status}];
}

std::string ApiMetrics::render() const {
    std::lock_guard lock(mu_);
    std::string o =
        "# HELP llmtrain_api_request_duration_seconds Time from request parsed to response ready, per route.\n"
        "# TYPE llmtrain_api_request_duration_seconds histogram\n";
    for (const auto& [key, h] : latency_) {
        auto labels = fmt::format("route=\"{}\",method=\"{}\"", prom_label(key.first), key.second);
        for (size_t i = 0; i < kBuckets.size(); ++i)
            o += fmt::format("llmtrain_api_request_duration_seconds_bucket{{{},le=\"{}\"}} {}\n", labels, kBuckets[i],
                             h.counts[i]);
        o += fmt::format("llmtrain_api_request_duration_seconds_bucket{{{},le=\"+Inf\"}} {}\n", labels, h.count);
        o += fmt::format("llmtrain_api_request_duration_seconds_sum{{{}}} {}\n", labels, h.sum);
        o += fmt::format("llmtrain_api_request_duration_seconds_count{{{}}} {}\n", labels, h.count);
    }
    o += "# HELP llmtrain_api_requests_total API requests by route, method and status code.\n"
         "# TYPE llmtrain_api_requests_total counter\n";
    for (const auto& [key, n] : requests_)
        o += fmt::format("llmtrain_api_requests_total{{route=\"{}\",method=\"{}\",code=\"{}\"}} {}\n",
                         prom_label(std::get<0>(key)), std::get<1>(key), std::get<2>(key), n);
    return o;
}

}  // namespace llmt::server
