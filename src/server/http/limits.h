// The HTTP layer's limits and deadlines, with their defaults (`llmtrain serve` flags in parentheses;
// docs/server.md "HTTP layer"). A slow or hostile client costs at most these, and never a worker while
// it sends its head.
#pragma once

#include <cstddef>
#include <cstdint>

#include "server/http/request_head.h"

namespace llmt::server::http {

struct Limits {
    HeadLimits head;                    // 16 KiB head, 100 fields, 8 KiB target
    uint64_t max_body_bytes = 1 << 20;  // after chunked decoding too (--max-body-bytes)
    double head_timeout_s = 10;         // the whole head, from the first byte awaited; also idle keep-alive (--head-timeout-s)
    double body_timeout_s = 30;         // the whole body (--body-timeout-s)
    double write_timeout_s = 30;        // each wait for the client to take bytes of the answer
    double linger_s = 2;                // a refused request's unread body is read and dropped this long before close
    size_t max_connections = 512;       // open sockets; past it the oldest still sending a head is closed (--max-connections)
    size_t max_queued = 64;             // complete heads waiting for a worker; past it 503 + Retry-After at once (--max-queued)
    int retry_after_s = 1;              // the Retry-After of that 503
};

}  // namespace llmt::server::http
