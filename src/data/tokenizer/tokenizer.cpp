// Byte-level BPE: building the lookup tables, encoding a text (pre-tokenizer, then for each piece the
// per-thread piece and word caches in front of the merge loop of tokenizer_bpe.h), added/special tokens,
// decode, and the multi-threaded batch and large-text encoders.
#include "data/tokenizer/tokenizer.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <exception>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "data/tokenizer/tokenizer_bpe.h"
#include "data/tokenizer/tokenizer_piece_cache.h"
#include "data/tokenizer/tokenizer_pretokenize.h"
#include "data/tokenizer/tokenizer_vocab.h"
#include "data/tokenizer/tokenizer_word_cache.h"

namespace llmt::data {
namespace {

std::atomic<uint64_t> g_next_serial{1};

std::size_t pow2_at_least(std::size_t n) {
    std::size_t p = 16;
    while (p < n) p <<= 1;
    return p;
}

// One encoding thread's caches, in the order a piece meets them (thread_local: no locks).
struct EncodeState {
    PieceCache pieces;  // pieces of 2..16 bytes -> 1..3 ids, whatever made them
    WordCache words;    // pieces up to 64 bytes that the merge loop encoded
};

EncodeState& thread_state(const TokenizerImpl& impl) {
    thread_local EncodeState state;
    if (state.words.owner() != impl.serial) {
        state.pieces.reset(impl.serial);
        state.words.reset(impl.serial);
    }
    return state;
}

// A piece that the piece cache does not hold: its token, else the word cache's ids, else the merge loop's.
// The same ids as encode_piece_uncached (tokenizer_bpe.h).
void encode_piece_slow(const TokenizerImpl& v, std::string_view piece, WordCache& words, std::vector<uint32_t>& out) {
    const auto* p = reinterpret_cast<const unsigned char*>(piece.data());
    const std::size_t n = piece.size();
    const uint64_t h = hash_bytes(p, n);
    if (v.whole_word_first) {
        const uint32_t whole = v.find_token(p, n, h);
        if (whole != kNoToken) {
            out.push_back(whole);
            return;
        }
    }
    const bool cacheable = n <= WordCache::kMaxWordBytes;
    if (cacheable && words.lookup(piece, h, out)) return;
    const std::size_t start = out.size();
    bpe_merge(v, p, n, out);
    if (cacheable) words.insert(piece, h, out.data() + start, out.size() - start);
}

// Splits `text` into pieces and appends their ids: a one-byte piece is its byte's token; a piece of 2..16
// bytes is looked up in the piece cache first; everything else goes to encode_piece_slow.
template <std::size_t (*NextPiece)(std::string_view, std::size_t)>
void encode_pieces(const TokenizerImpl& v, std::string_view text, std::vector<uint32_t>& out) {
    EncodeState& st = thread_state(v);
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    for (std::size_t pos = 0; pos < text.size();) {
        const std::size_t end = NextPiece(text, pos);
        const std::size_t n = end - pos;
        if (n == 1) {
            out.push_back(v.byte_id[s[pos]]);
        } else if (n <= PieceKey::kMaxBytes) {
            const PieceKey key = PieceKey::of(s, text.size(), pos, n);
            const uint64_t h = key.hash();
            if (!st.pieces.lookup(key, h, out)) {
                const std::size_t start = out.size();
                encode_piece_slow(v, text.substr(pos, n), st.words, out);
                st.pieces.insert(key, h, out.data() + start, out.size() - start);
            }
        } else {
            encode_piece_slow(v, text.substr(pos, n), st.words, out);
        }
        pos = end;
    }
}

// Pre-tokenization and BPE of text without added tokens.
void encode_ordinary_into(const TokenizerImpl& v, std::string_view text, std::vector<uint32_t>& out) {
    if (v.pretokenizer == Pretokenizer::kLlama3)
        encode_pieces<llama3_next_piece>(v, text, out);
    else
        encode_pieces<gpt2_next_piece>(v, text, out);
}

// The leftmost added token at or after `from`, the longest there (Hugging Face's leftmost-longest
// matching; tiktoken's specials never overlap); only non-special ones unless allow_special. npos if none.
std::size_t find_added(const TokenizerImpl& v, std::string_view text, std::size_t from, bool allow_special,
                       const AddedToken** hit) {
    if (v.added_by_length.empty() || (!allow_special && !v.any_non_special)) return std::string_view::npos;
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    for (std::size_t pos = from; pos < text.size(); ++pos) {
        if (!v.added_first_byte[s[pos]]) continue;
        for (const AddedToken& t : v.added_by_length) {
            if ((allow_special || !t.special) && t.text.size() <= text.size() - pos &&
                bytes_equal(t.text.data(), s + pos, t.text.size())) {
                *hit = &t;
                return pos;
            }
        }
    }
    return std::string_view::npos;
}

int resolve_threads(int threads) {
    if (threads > 0) return threads;
    const unsigned hc = std::thread::hardware_concurrency();
    return hc == 0 ? 1 : static_cast<int>(hc);
}

// Process-wide encoding threads, started on first use and kept, so that their per-thread word caches stay
// warm from one encode_batch / encode_parallel call to the next (a data pipeline calls it per batch).
// One job at a time (callers queue on job_mutex_); the calling thread works as one of the job's threads.
// Never destroyed: its threads wait on a condition variable until the process exits.
class EncodePool {
public:
    static EncodePool& instance() {
        static EncodePool* pool = new EncodePool;  // leaked on purpose (see above)
        return *pool;
    }

    // Runs body() on `n` threads at once (n - 1 pool threads and the caller); body must not throw.
    void run(int n, const std::function<void()>& body) {
        std::lock_guard<std::mutex> job(job_mutex_);
        const int helpers = n - 1;
        {
            std::lock_guard<std::mutex> lk(m_);
            while (static_cast<int>(threads_.size()) < helpers) {
                const int idx = static_cast<int>(threads_.size());
                threads_.emplace_back([this, idx] { work(idx); });
            }
            body_ = &body;
            wanted_ = helpers;
            running_ = helpers;
            ++generation_;
        }
        cv_.notify_all();
        body();
        std::unique_lock<std::mutex> lk(m_);
        done_.wait(lk, [this] { return running_ == 0; });
        body_ = nullptr;
    }

private:
    void work(int idx) {
        uint64_t seen = 0;
        std::unique_lock<std::mutex> lk(m_);
        for (;;) {
            cv_.wait(lk, [&] { return generation_ != seen && idx < wanted_; });
            seen = generation_;
            const std::function<void()>* body = body_;
            lk.unlock();
            (*body)();
            lk.lock();
            if (--running_ == 0) done_.notify_all();
        }
    }

    std::mutex job_mutex_;
    std::mutex m_;
    std::condition_variable cv_, done_;
    std::vector<std::thread> threads_;
    const std::function<void()>* body_ = nullptr;
    uint64_t generation_ = 0;
    int wanted_ = 0, running_ = 0;
};

// Runs fn(i) for i in [0, n) on `threads` threads, handing out indices in blocks; rethrows the first error.
template <typename Fn>
void parallel_for(std::size_t n, int threads, Fn fn) {
    threads = std::min<int>(threads, static_cast<int>(std::max<std::size_t>(n, 1)));
    if (threads <= 1) {
        for (std::size_t i = 0; i < n; ++i) fn(i);
        return;
    }
    const std::size_t block = std::clamp<std::size_t>(n / (static_cast<std::size_t>(threads) * 16), 1, 64);
    std::atomic<std::size_t> next{0};
    std::exception_ptr error;
    std::atomic<bool> failed{false};
    const std::function<void()> worker = [&] {
        try {
            for (;;) {
                const std::size_t b = next.fetch_add(block);
                if (b >= n || failed.load(std::memory_order_relaxed)) break;
                for (std::size_t i = b; i < std::min(n, b + block); ++i) fn(i);
            }
        } catch (...) {
            if (!failed.exchange(true)) error = std::current_exception();
        }
    };
    EncodePool::instance().run(threads, worker);
    if (error) std::rethrow_exception(error);
}

}  // namespace

TokenizerImpl TokenizerImpl::build(RankList list) {
    TokenizerImpl v;
    v.source_path = std::move(list.source_path);
    v.source_sha256 = std::move(list.source_sha256);
    const std::string& src = v.source_path;
    uint32_t max_id = 0;
    for (const auto& [bytes, id] : list.ranks) {
        if (id == kNoToken) throw FormatError(fmt::format("{}: token id {} is out of range", src, id));
        max_id = std::max(max_id, id);
    }
    for (const auto& t : list.specials) {
        if (t.id == kNoToken) throw FormatError(fmt::format("{}: token id {} is out of range", src, t.id));
        max_id = std::max(max_id, t.id);
    }
    if (list.ranks.empty()) throw FormatError(fmt::format("{}: no tokens", src));
    // Tables are sized by the largest id; a vocabulary of more than 16M ids is a corrupt file, not a model.
    if (max_id >= (1u << 24))
        throw FormatError(fmt::format("{}: token id {} is too large (at most 16777215)", src, max_id));
    v.vocab_size = std::size_t{max_id} + 1;
    v.off.assign(v.vocab_size, 0);
    v.len.assign(v.vocab_size, 0);
    v.kind.assign(v.vocab_size, 0);
    std::size_t arena_bytes = 0;
    for (const auto& r : list.ranks) arena_bytes += r.first.size();
    for (const auto& s : list.specials) arena_bytes += s.text.size();
    v.arena.reserve(arena_bytes);
    auto add = [&](const std::string& bytes, uint32_t id, uint8_t token_kind) {
        // An added token may also be a mergeable one (GPT-2's tokenizer.json lists <|endoftext|> in both).
        if (token_kind == 2 && v.kind[id] == 1 && v.bytes_of(id) == bytes) return;
        if (v.kind[id] != 0) throw FormatError(fmt::format("{}: token id {} appears twice", src, id));
        if (bytes.empty()) throw FormatError(fmt::format("{}: token id {} has no bytes", src, id));
        v.kind[id] = token_kind;
        v.off[id] = static_cast<uint32_t>(v.arena.size());
        v.len[id] = static_cast<uint32_t>(bytes.size());
        v.arena += bytes;
    };
    for (const auto& [bytes, id] : list.ranks) add(bytes, id, 1);
    for (const auto& t : list.specials) add(t.text, t.id, 2);

    const std::size_t nslots = pow2_at_least(list.ranks.size() * 2);
    v.token_slots.assign(nslots, TokenSlot{});
    v.token_mask = nslots - 1;
    for (const auto& [bytes, id] : list.ranks) {
        const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
        const uint64_t h = hash_bytes(p, bytes.size());
        if (v.find_token(p, bytes.size(), h) != kNoToken) {
            throw FormatError(fmt::format("{}: token id {} has the same bytes as token id {}", src, id,
                                          v.find_token(p, bytes.size(), h)));
        }
        uint64_t i = h & v.token_mask;
        while (v.token_slots[i].id != kNoToken) i = (i + 1) & v.token_mask;
        if (bytes.size() > 0xFFFF)
            throw FormatError(fmt::format("{}: token id {} is {} bytes long (at most 65535)", src, id, bytes.size()));
        v.token_slots[i] = TokenSlot{head_of(p, bytes.size()), id, static_cast<uint16_t>(bytes.size()), tag_of(h)};
    }
    for (int b = 0; b < 256; ++b) {
        const unsigned char c = static_cast<unsigned char>(b);
        v.byte_id[b] = v.find_token(&c, 1, hash_bytes(&c, 1));
        if (v.byte_id[b] == kNoToken) {
            throw FormatError(fmt::format("{}: no token for the single byte 0x{:02x}; a byte-level BPE vocabulary "
                                          "needs all 256",
                                          src, b));
        }
    }
    std::vector<std::pair<uint64_t, uint32_t>> pairs;  // (left id << 32 | right id, rank)
    if (!list.merges.empty()) {
        // Hugging Face: the listed pairs, ranked by their index; each merge's parts and result are tokens.
        v.rank_id.resize(list.merges.size());
        for (std::size_t i = 0; i < list.merges.size(); ++i) {
            const auto& [l, r] = list.merges[i];
            auto id_of = [&](const std::string& b, const char* what) {
                const auto* p = reinterpret_cast<const unsigned char*>(b.data());
                const uint32_t id = b.empty() ? kNoToken : v.find_token(p, b.size(), hash_bytes(p, b.size()));
                if (id == kNoToken)
                    throw FormatError(
                        fmt::format("{}: model.merges[{}]: its {} is not a token of model.vocab", src, i, what));
                return id;
            };
            const uint32_t a = id_of(l, "left part"), b = id_of(r, "right part");
            v.rank_id[i] = id_of(l + r, "concatenation");
            pairs.emplace_back((uint64_t{a} << 32) | b, static_cast<uint32_t>(i));
        }
        if (list.merges.size() >= kNoToken) throw FormatError(fmt::format("{}: too many merges", src));
    } else {
        // tiktoken: every split of every token into two tokens is a pair the merge loop may look up, ranked
        // by the token's id.
        v.rank_id.resize(v.vocab_size);
        for (std::size_t i = 0; i < v.vocab_size; ++i) v.rank_id[i] = static_cast<uint32_t>(i);
    }
    for (std::size_t t = 0; list.merges.empty() && t < list.ranks.size(); ++t) {
        const auto& [bytes, id] = list.ranks[t];
        const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
        for (std::size_t k = 1; k < bytes.size(); ++k) {
            const uint32_t a = v.find_token(p, k, hash_bytes(p, k));
            if (a == kNoToken) continue;
            const uint32_t b = v.find_token(p + k, bytes.size() - k, hash_bytes(p + k, bytes.size() - k));
            if (b == kNoToken) continue;
            pairs.emplace_back((uint64_t{a} << 32) | b, id);
        }
    }
    v.pairs.reserve(pairs.size());
    for (const auto& [key, rank] : pairs) {
        const uint32_t stored = v.pairs.insert(static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key), rank);
        if (stored != rank && !list.merges.empty())
            throw FormatError(fmt::format("{}: model.merges[{}] repeats model.merges[{}]", src, rank, stored));
    }
    v.whole_word_first = list.whole_word_first;
    v.pretokenizer = list.pretokenizer;
    for (const auto& t : list.specials) {
        v.specials.emplace_back(t.text, t.id);
        if (t.text == list.eot_text) v.eot = t.id;
        v.added_first_byte[static_cast<unsigned char>(t.text[0])] = true;
        v.any_non_special = v.any_non_special || !t.special;
    }
    v.added_by_length = std::move(list.specials);
    std::stable_sort(v.added_by_length.begin(), v.added_by_length.end(),
                     [](const AddedToken& a, const AddedToken& b) { return a.text.size() > b.text.size(); });
    if (v.eot == kNoToken) throw FormatError(fmt::format("{}: no {} special token", src, list.eot_text));
    for (const auto* ids : {&list.prefix, &list.suffix}) {
        for (uint32_t id : *ids) {
            if (id >= v.vocab_size || v.kind[id] == 0)
                throw FormatError(fmt::format("{}: post_processor: token id {} is not in the vocabulary", src, id));
        }
    }
    v.prefix = std::move(list.prefix);
    v.suffix = std::move(list.suffix);
    v.serial = g_next_serial.fetch_add(1);
    return v;
}

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : impl_(std::move(impl)) {}

std::vector<uint32_t> Tokenizer::encode_ordinary(std::string_view text) const {
    std::vector<uint32_t> out;
    out.reserve(text.size() / 3 + 8);
    encode_into(text, false, out);
    return out;
}

void Tokenizer::encode_into(std::string_view text, bool allow_special, std::vector<uint32_t>& out) const {
    std::size_t pos = 0;
    for (;;) {
        const AddedToken* hit = nullptr;
        const std::size_t at = find_added(*impl_, text, pos, allow_special, &hit);
        if (at == std::string_view::npos) break;
        encode_ordinary_into(*impl_, text.substr(pos, at - pos), out);
        out.push_back(hit->id);
        pos = at + hit->text.size();
    }
    encode_ordinary_into(*impl_, text.substr(pos), out);
}

std::size_t Tokenizer::find_added_token(std::string_view text, std::size_t from, bool allow_special, uint32_t* id,
                                        std::size_t* len) const {
    const AddedToken* hit = nullptr;
    const std::size_t at = find_added(*impl_, text, from, allow_special, &hit);
    if (at != std::string_view::npos) {
        *id = hit->id;
        *len = hit->text.size();
    }
    return at;
}

uint32_t Tokenizer::token_id(std::string_view bytes) const {
    for (const auto& [text, id] : impl_->specials)
        if (text == bytes) return id;
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    return bytes.empty() ? kNoToken : impl_->find_token(p, bytes.size(), hash_bytes(p, bytes.size()));
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
    std::vector<uint32_t> out;
    out.reserve(text.size() / 3 + 8);
    encode_into(text, allow_special, out);
    return out;
}

std::string_view Tokenizer::token_bytes(uint32_t id) const {
    if (id >= impl_->vocab_size || impl_->kind[id] == 0) {
        throw InputError(fmt::format("token id {} is not in the vocabulary of {} (size {})", id,
                                     impl_->source_path, impl_->vocab_size));
    }
    return impl_->bytes_of(id);
}

std::string Tokenizer::decode(std::span<const uint32_t> ids) const {
    std::string out;
    out.reserve(ids.size() * 4);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const uint32_t id = ids[i];
        if (id >= impl_->vocab_size || impl_->kind[id] == 0) {
            throw InputError(fmt::format("token id {} (at index {}) is not in the vocabulary of {} (size {})", id, i,
                                         impl_->source_path, impl_->vocab_size));
        }
        out.append(impl_->arena, impl_->off[id], impl_->len[id]);
    }
    return out;
}

uint32_t Tokenizer::eot_token() const { return impl_->eot; }
std::size_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
const std::string& Tokenizer::source_sha256() const { return impl_->source_sha256; }
const std::string& Tokenizer::source_path() const { return impl_->source_path; }
const std::vector<std::pair<std::string, uint32_t>>& Tokenizer::special_tokens() const { return impl_->specials; }
const std::vector<uint32_t>& Tokenizer::prefix_tokens() const { return impl_->prefix; }
const std::vector<uint32_t>& Tokenizer::suffix_tokens() const { return impl_->suffix; }

std::vector<std::vector<uint32_t>> encode_batch(const Tokenizer& tok, const std::vector<std::string_view>& docs,
                                                bool allow_special, int threads) {
    std::vector<std::vector<uint32_t>> out(docs.size());
    parallel_for(docs.size(), resolve_threads(threads),
                 [&](std::size_t i) { out[i] = tok.encode(docs[i], allow_special); });
    return out;
}

std::vector<uint32_t> encode_parallel(const Tokenizer& tok, std::string_view text, bool allow_special, int threads,
                                      std::size_t min_chunk_bytes) {
    threads = resolve_threads(threads);
    if (threads <= 1 || text.size() < 2 * std::max<std::size_t>(min_chunk_bytes, 1)) {
        return tok.encode(text, allow_special);
    }
    // Jobs: chunks encoded ordinarily, each followed by an optional special token id.
    struct Job {
        std::string_view text;
        uint32_t special;
    };
    std::vector<Job> jobs;
    const std::size_t target = std::max(min_chunk_bytes, text.size() / (static_cast<std::size_t>(threads) * 8));
    auto printable = [](char c) { return c > ' ' && c < 0x7F; };
    // Cuts `part` after '\n' at safe points: with printable ASCII on both sides, the '\n' is a one-character
    // whitespace run, so it is a piece of its own (at the end of a chunk too) and the next piece starts
    // after it whatever follows; the regex never looks behind.
    auto add_ordinary = [&](std::string_view part, uint32_t special) {
        while (part.size() > 2 * target) {
            std::size_t cut = std::string_view::npos;
            for (std::size_t at = part.find('\n', target); at != std::string_view::npos && at + 1 < part.size();
                 at = part.find('\n', at + 1)) {
                if (at > 0 && printable(part[at - 1]) && printable(part[at + 1])) {
                    cut = at + 1;
                    break;
                }
            }
            if (cut == std::string_view::npos || part.size() - cut < target / 2) break;
            jobs.push_back({part.substr(0, cut), kNoToken});
            part.remove_prefix(cut);
        }
        jobs.push_back({part, special});
    };
    // Added tokens are recognised exactly as encode_into() does (leftmost-longest).
    std::size_t pos = 0;
    for (;;) {
        uint32_t id = 0;
        std::size_t len = 0;
        const std::size_t at = tok.find_added_token(text, pos, allow_special, &id, &len);
        if (at == std::string_view::npos) {
            add_ordinary(text.substr(pos), kNoToken);
            break;
        }
        add_ordinary(text.substr(pos, at - pos), id);
        pos = at + len;
    }
    std::vector<std::vector<uint32_t>> parts(jobs.size());
    parallel_for(jobs.size(), threads, [&](std::size_t i) {
        parts[i] = tok.encode_ordinary(jobs[i].text);
        if (jobs[i].special != kNoToken) parts[i].push_back(jobs[i].special);
    });
    std::size_t total = 0;
    for (const auto& p : parts) total += p.size();
    std::vector<uint32_t> out;
    out.reserve(total);
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

}  // namespace llmt::data
