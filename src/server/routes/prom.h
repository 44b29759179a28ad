// Prometheus text exposition (format 0.0.4) for GET /metrics: API request latency histograms per
// route and method, request counts per status class; job gauges are added at scrape time.
#pragma once

#include <array>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace llmt::server {

// Thread-safe.
class ApiMetrics {
public:
    static constexpr std::array<double, 12> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                       0.05,   0.1,   0.25,   0.5,   1.0,  5.0};
    void observe(const std::string& route, const std::string& method, int status, double seconds);
    // The histogram and counter families, in exposition format.
    std::string render() const;

private:
    struct Histogram {
        std::array<uint64_t, kBuckets.size()> counts{};
        uint64_t count = 0;
        double sum = 0;
    };
    mutable std::mutex mu_;
    std::map<std::pair<std::string, std::string>, Histogram> latency_;
    std::map<std::tuple<std::string, std::string, int>, uint64_t> requests_;
};

// Escapes a label value (backslash, quote, newline).
std::string prom_label(const std::string& v);

}  // namespace llmt::server
