// torch's TCPStore wire format, both generations (docs/distributed.md "The torch store protocol").
// A query is one query-code byte followed by its fields; integers are native (little-endian on every
// host we run on), strings and values are a u64 length then the bytes, key lists a u64 count then
// strings. torch <= 1.13 numbers its queries from SET = 0 and has no handshake; torch 2.x opens every
// connection with VALIDATE (code 0) and a u32 magic number, which shifts every other code by one,
// and adds append, multi_get/multi_set, cancel_wait, ping and (2.6+) queue_push/pop/len.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llmt::dist {

enum class TorchStoreGeneration { kTorch1, kTorch2 };
const char* to_string(TorchStoreGeneration g);

enum class StoreQuery {
    kValidate, kSet, kCompareSet, kGet, kAdd, kCheck, kWait, kNumKeys, kDeleteKey, kWatchKey,
    kAppend, kMultiGet, kMultiSet, kCancelWait, kPing, kQueuePush, kQueuePop, kQueueLen,
};
const char* to_string(StoreQuery q);

inline constexpr uint32_t kTorchValidationMagic = 0x3C85F7CE;
enum class CheckReply : uint8_t { kReady = 0, kNotReady = 1 };
enum class WaitReply : uint8_t { kStopWaiting = 0, kWaitCanceled = 1 };
// torch's servers refuse longer strings and values; so do we (a garbage length must not allocate).
inline constexpr uint64_t kMaxStoreString = 64ull << 20;
inline constexpr uint64_t kMaxStoreKeys = 1ull << 20;

// The code of q in generation g; nullopt when that generation has no such query.
std::optional<uint8_t> query_code(TorchStoreGeneration g, StoreQuery q);
// The query a code means in generation g; nullopt for a code that generation does not know.
std::optional<StoreQuery> query_of(TorchStoreGeneration g, uint8_t code);

// Builds one query or reply.
class WireWriter {
public:
    WireWriter& u8(uint8_t v);
    WireWriter& u32(uint32_t v);
    WireWriter& i64(int64_t v);
    WireWriter& u64(uint64_t v);
    WireWriter& bytes(const std::string& s);  // u64 length, then the bytes
    WireWriter& keys(const std::vector<std::string>& ks);  // u64 count, then each string
    const std::string& data() const { return buf_; }

private:
    std::string buf_;
};

// Reads fields from a buffer that may hold only part of a message: every read returns false when
// the bytes are not there yet (read again once more arrived) and throws WireError on a length
// beyond kMaxStoreString / kMaxStoreKeys (the connection is garbage and must be closed).
class WireReader {
public:
    explicit WireReader(const std::string& buf, size_t pos = 0) : buf_(buf), pos_(pos) {}
    bool u8(uint8_t& v);
    bool u32(uint32_t& v);
    bool i64(int64_t& v);
    bool u64(uint64_t& v);
    bool bytes(std::string& s);
    bool keys(std::vector<std::string>& ks);
    size_t pos() const { return pos_; }

private:
    bool raw(void* dst, size_t n);
    const std::string& buf_;
    size_t pos_;
};

struct WireError : std::exception {
    explicit WireError(std::string m) : msg(std::move(m)) {}
    const char* what() const noexcept override { return msg.c_str(); }
    std::string msg;
};

}  // namespace llmt::dist
