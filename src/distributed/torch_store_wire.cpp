// Query codes per generation and the field encoders. The tables are the two generations' enums as
// numbered by torch (1.13: TCPStore.cpp; 2.x: TCPStoreBackend.hpp), checked byte for byte by
// tests/distributed/torch_store_interop_test.cpp against the PyTorch installed on the machine.
#include "distributed/torch_store_wire.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <utility>

namespace llmt::dist {
namespace {

using Q = StoreQuery;
// torch <= 1.13: SET = 0 ... DELETE_KEY = 8 (WATCH_KEY sits before DELETE_KEY).
constexpr std::array kTorch1Codes{Q::kSet,     Q::kCompareSet, Q::kGet,      Q::kAdd,      Q::kCheck,
                                  Q::kWait,    Q::kNumKeys,    Q::kWatchKey, Q::kDeleteKey};
// torch 2.x: VALIDATE = 0, then the 1.x queries without WATCH_KEY, then the libuv server's additions.
constexpr std::array kTorch2Codes{Q::kValidate,  Q::kSet,       Q::kCompareSet, Q::kGet,       Q::kAdd,
                                  Q::kCheck,     Q::kWait,      Q::kNumKeys,    Q::kDeleteKey, Q::kAppend,
                                  Q::kMultiGet,  Q::kMultiSet,  Q::kCancelWait, Q::kPing,      Q::kQueuePush,
                                  Q::kQueuePop,  Q::kQueueLen};

template <size_t N>
std::optional<uint8_t> code_in(const std::array<Q, N>& table, Q q) {
    for (size_t i = 0; i < N; ++i)
        if (table[i] == q) return static_cast<uint8_t>(i);
    return std::nullopt;
}

}  // namespace

const char* to_string(TorchStoreGeneration g) {
    return g == TorchStoreGeneration::kTorch1 ? "torch<=1.13" : "torch2";
}

const char* to_string(StoreQuery q) {
    switch (q) {
        case Q::kValidate: return "validate";
        case Q::kSet: return "set";
        case Q::kCompareSet: return "compare_set";
        case Q::kGet: return "get";
        case Q::kAdd: return "add";
        case Q::kCheck: return "check";
        case Q::kWait: return "wait";
        case Q::kNumKeys: return "num_keys";
        case Q::kDeleteKey: return "delete_key";
        case Q::kWatchKey: return "watch_key";
        case Q::kAppend: return "append";
        case Q::kMultiGet: return "multi_get";
        case Q::kMultiSet: return "multi_set";
        case Q::kCancelWait: return "cancel_wait";
        case Q::kPing: return "ping";
        case Q::kQueuePush: return "queue_push";
        case Q::kQueuePop: return "queue_pop";
        case Q::kQueueLen: return "queue_len";
    }
    return "?";
}

std::optional<uint8_t> query_code(TorchStoreGeneration g, StoreQuery q) {
    return g == TorchStoreGeneration::kTorch1 ? code_in(kTorch1Codes, q) : code_in(kTorch2Codes, q);
}

std::optional<StoreQuery> query_of(TorchStoreGeneration g, uint8_t code) {
    if (g == TorchStoreGeneration::kTorch1) {
        if (code < kTorch1Codes.size()) return kTorch1Codes[code];
    } else if (code < kTorch2Codes.size()) {
        return kTorch2Codes[code];
    }
    return std::nullopt;
}

// ---------------------------------------------------------------- writer

WireWriter& WireWriter::u8(uint8_t v) {
    buf_.push_back(static_cast<char>(v));
    return *this;
}
WireWriter& WireWriter::u32(uint32_t v) {
    buf_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
}
WireWriter& WireWriter::i64(int64_t v) {
    buf_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
}
WireWriter& WireWriter::u64(uint64_t v) {
    buf_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
}
WireWriter& WireWriter::bytes(const std::string& s) {
    u64(s.size());
    buf_ += s;
    return *this;
}
WireWriter& WireWriter::keys(const std::vector<std::string>& ks) {
    u64(ks.size());
    for (const auto& k : ks) bytes(k);
    return *this;
}

// ---------------------------------------------------------------- reader

bool WireReader::raw(void* dst, size_t n) {
    if (buf_.size() - pos_ < n) return false;
    std::memcpy(dst, buf_.data() + pos_, n);
    pos_ += n;
    return true;
}
bool WireReader::u8(uint8_t& v) { return raw(&v, sizeof v); }
bool WireReader::u32(uint32_t& v) { return raw(&v, sizeof v); }
bool WireReader::i64(int64_t& v) { return raw(&v, sizeof v); }
bool WireReader::u64(uint64_t& v) { return raw(&v, sizeof v); }

bool WireReader::bytes(std::string& s) {
    uint64_t n = 0;
    if (!u64(n)) return false;
    if (n > kMaxStoreString) throw WireError(fmt::format("a string of {} bytes (at most {})", n, kMaxStoreString));
    if (buf_.size() - pos_ < n) return false;
    s.assign(buf_, pos_, n);
    pos_ += n;
    return true;
}

bool WireReader::keys(std::vector<std::string>& ks) {
    uint64_t n = 0;
    if (!u64(n)) return false;
    if (n > kMaxStoreKeys) throw WireError(fmt::format("{} keys in one query (at most {})", n, kMaxStoreKeys));
    ks.assign(n, {});
    for (auto& k : ks)
        if (!bytes(k)) return false;
    return true;
}

}  // namespace llmt::dist
