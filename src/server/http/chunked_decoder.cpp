// Chunked body decoding, byte-incremental with a decoded-size limit; see chunked_decoder.h.
#include "server/http/chunked_decoder.h"

#include <fmt/format.h>

#include "server/http/http_error.h"

namespace llmt::server::http {

namespace {

[[noreturn]] void bad_chunk(const std::string& msg) { throw HttpError(400, "bad_chunk", "chunked body: " + msg); }

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

void ChunkedDecoder::end_size_line() {
    if (line_.empty() || line_.back() != '\r') bad_chunk("a chunk-size line does not end with CRLF");
    line_.pop_back();
    size_t i = 0;
    uint64_t size = 0;
    for (; i < line_.size() && hex_digit(line_[i]) >= 0; ++i) {
        if (i >= 15) bad_chunk("a chunk size has more than 15 hex digits");
        size = size * 16 + static_cast<uint64_t>(hex_digit(line_[i]));
    }
    if (i == 0) bad_chunk("a chunk-size line does not start with hex digits");
    while (i < line_.size() && (line_[i] == ' ' || line_[i] == '\t')) ++i;
    if (i < line_.size() && line_[i] != ';') bad_chunk("unexpected bytes after a chunk size");
    for (; i < line_.size(); ++i)  // chunk extensions are ignored, but must be printable
        if (static_cast<unsigned char>(line_[i]) < 0x20 && line_[i] != '\t')
            bad_chunk("control bytes in a chunk extension");
    line_.clear();
    if (size == 0) {
        state_ = State::kTrailer;
        return;
    }
    if (size > max_body_bytes_ - decoded_)
        throw HttpError(
            413, "payload_too_large",
            fmt::format("the chunked request body is over the server's limit of {} bytes", max_body_bytes_));
    chunk_left_ = size;
    state_ = State::kData;
}

void ChunkedDecoder::end_trailer_line() {
    if (line_.empty() || line_.back() != '\r') bad_chunk("a trailer line does not end with CRLF");
    line_.pop_back();
    if (line_.empty()) {
        state_ = State::kDone;
        return;
    }
    if (line_.find(':') == std::string::npos || line_.front() == ' ' || line_.front() == '\t')
        bad_chunk("a trailer line is not a header field");
    line_.clear();  // trailer fields are read and dropped
}

size_t ChunkedDecoder::feed(std::string_view in, std::string* out) {
    size_t used = 0;
    while (used < in.size() && state_ != State::kDone) {
        if (state_ == State::kData) {
            size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_left_, in.size() - used));
            out->append(in.data() + used, n);
            used += n;
            chunk_left_ -= n;
            decoded_ += n;
            if (chunk_left_ == 0) {
                state_ = State::kDataEnd;
                data_end_seen_ = 0;
            }
            continue;
        }
        char c = in[used++];
        if (state_ == State::kDataEnd) {
            if (c != "\r\n"[data_end_seen_]) bad_chunk("chunk data is not followed by CRLF");
            if (++data_end_seen_ == 2) state_ = State::kSizeLine;
            continue;
        }
        // kSizeLine or kTrailer: collect a line.
        if (c != '\n') {
            if (line_.size() >= kMaxLineBytes)
                bad_chunk(fmt::format("a chunk-size or trailer line is over {} bytes", kMaxLineBytes));
            if (state_ == State::kTrailer && ++trailer_bytes_ > kMaxTrailerBytes)
                bad_chunk(fmt::format("the trailer is over {} bytes", kMaxTrailerBytes));
            line_ += c;
            continue;
        }
        if (state_ == State::kSizeLine)
            end_size_line();
        else
            end_trailer_line();
    }
    return used;
}

}  // namespace llmt::server::http
