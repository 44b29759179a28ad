// Response setters and reason phrases; see response.h.
#include "server/http/response.h"

namespace llmt::server::http {

void Response::set_header(const std::string& name, const std::string& value) {
    if (name.find_first_of("\r\n:") != std::string::npos || value.find_first_of("\r\n") != std::string::npos) return;
    headers.set(name, value);
}

void Response::set_content(std::string content, const std::string& content_type) {
    body = std::move(content);
    set_header("Content-Type", content_type);
}

void Response::set_content_provider(uint64_t length, const std::string& content_type, ContentProvider p) {
    provider_length = length;
    provider = std::move(p);
    set_header("Content-Type", content_type);
}

void Response::set_chunked_content_provider(const std::string& content_type, ChunkedContentProvider p) {
    chunked_provider = std::move(p);
    set_header("Content-Type", content_type);
}

const char* reason_phrase(int status) {
    switch (status) {
        case 100: return "Continue";
        case 200: return "OK";
        case 201: return "Created";
        case 202: return "Accepted";
        case 204: return "No Content";
        case 304: return "Not Modified";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 409: return "Conflict";
        case 411: return "Length Required";
        case 413: return "Content Too Large";
        case 414: return "URI Too Long";
        case 415: return "Unsupported Media Type";
        case 422: return "Unprocessable Content";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 501: return "Not Implemented";
        case 503: return "Service Unavailable";
        case 505: return "HTTP Version Not Supported";
        default: return "Unknown";
    }
}

}  // namespace llmt::server::http
