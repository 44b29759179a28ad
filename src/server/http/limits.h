// The HTTP layer's limits and deadlines, with their defaults (`llmtrain serve` flags in parentheses;
// docs/server.md "HTTP layer", docs/security.md). A slow or hostile client costs at most these, and
// never a worker while it sends its head or is slow to read a fixed answer. The per-address limits
// never refuse the health path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "server/http/request_head.h"

namespace llmt::server::http {

struct Limits {
    HeadLimits head;                    // 16 KiB head, 100 fields, 8 KiB target
    uint64_t max_body_bytes = 1 << 20;  // after chunked decoding too (--max-body-bytes)
    double head_timeout_s =
        10;  // the whole head, from the first byte awaited; also idle keep-alive (--head-timeout-s)
    double body_timeout_s = 30;         // the whole body (--body-timeout-s)
    double write_timeout_s = 30;        // a stream (download, followed log): each wait for the client to take bytes
    double response_timeout_s =
        30;  // a fixed answer, whole: past it a client that has not taken it is closed (--response-timeout-s)
    double linger_s = 2;                // a refused request's unread body is read and dropped this long before close
    size_t max_connections =
        512;                 // open sockets; past it the oldest still sending a head is closed (--max-connections)
    size_t max_queued = 64;  // complete heads waiting for a worker; past it 503 + Retry-After at once (--max-queued)
    int retry_after_s = 1;              // the Retry-After of that 503 (and of 429 below)
    size_t max_connections_per_address =
        256;  // open sockets from one address; past it 429 (--max-connections-per-address)
    size_t max_in_flight_per_address =
        64;  // requests from one address at a worker or being answered; past it 429 (--max-in-flight-per-address)
    size_t max_streams =
        0;  // answers streaming at once (each holds a worker); past it 503; 0: 3/4 of the workers (--max-streams)
};

}  // namespace llmt::server::http
