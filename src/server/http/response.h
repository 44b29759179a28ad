// What a handler answers: a status, header fields and either a fixed body or a content provider that
// streams it (a file of known length, or chunked output of unknown length such as a followed log).
// The names follow the cpp-httplib API the handlers were written against. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "server/http/headers.h"

namespace llmt::server::http {

// Where a content provider writes. write() returns false when the client is gone (stop then);
// done() ends a chunked stream; is_writable() is false once the client went away or the server stops.
struct DataSink {
    std::function<bool(const char* data, size_t size)> write;
    std::function<void()> done;
    std::function<bool()> is_writable;
};

// Called until `length` bytes from `offset` are written; returns false to abort (the connection closes).
using ContentProvider = std::function<bool(size_t offset, size_t length, DataSink& sink)>;
// Called until it calls sink.done(); `offset` counts the bytes written so far. False aborts.
using ChunkedContentProvider = std::function<bool(size_t offset, DataSink& sink)>;

struct Response {
    int status = 200;
    Headers headers;
    std::string body;
    std::optional<uint64_t> provider_length;  // with `provider`
    ContentProvider provider;
    ChunkedContentProvider chunked_provider;

    // Values with CR or LF are dropped (no header injection from data that reaches a header).
    void set_header(const std::string& name, const std::string& value);
    void set_content(std::string content, const std::string& content_type);
    void set_content_provider(uint64_t length, const std::string& content_type, ContentProvider p);
    void set_chunked_content_provider(const std::string& content_type, ChunkedContentProvider p);
};

// The status line's reason phrase ("Not Found"); "Unknown" for codes not listed.
const char* reason_phrase(int status);

}  // namespace llmt::server::http
