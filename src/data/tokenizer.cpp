// Byte-level BPE: building the lookup tables, the merge loop (merge the adjacent pair of lowest rank,
// leftmost on ties: tiktoken's byte_pair_merge, where the rank is the id of the concatenation, and Hugging
// Face's BPE, where it is the pair's index in the merge list), added/special tokens, a per-thread word
// cache, decode, and the multi-threaded batch and large-text encoders.
#include "data/tokenizer.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <exception>
#include <queue>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "data/tokenizer_pretokenize.h"
#include "data/tokenizer_vocab.h"

namespace llmt::data {
namespace {

std::atomic<uint64_t> g_next_serial{1};

std::size_t pow2_at_least(std::size_t n) {
    std::size_t p = 16;
    while (p < n) p <<= 1;
    return p;
}

// Words (pieces) a thread has encoded recently -> their ids. Owned by one thread (thread_local below),
// tied to one TokenizerImpl by serial; cleared when it holds 64K words, which keeps it simple and bounded
// (~4 MB a thread). The KJV + fortunes corpus has ~30K distinct multi-token words.
class WordCache {
public:
    static constexpr std::size_t kMaxWordBytes = 64;

    void reset(uint64_t owner) {
        owner_ = owner;
        clear();
    }
    uint64_t owner() const { return owner_; }

    // Appends the cached ids of `word` to `out`; false when absent.
    bool lookup(std::string_view word, uint64_t h, std::vector<uint32_t>& out) const {
        if (slots_.empty()) return false;
        for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.key_len == kEmpty) return false;
            if (s.hash == static_cast<uint32_t>(h >> 32) && s.key_len == word.size() &&
                bytes_equal(keys_.data() + s.key_off, word.data(), word.size())) {
                out.insert(out.end(), vals_.begin() + s.val_off, vals_.begin() + s.val_off + s.val_len);
                return true;
            }
        }
    }

    void insert(std::string_view word, uint64_t h, const uint32_t* ids, std::size_t n) {
        if (slots_.empty()) {
            slots_.assign(kSlots, Slot{});
            mask_ = kSlots - 1;
        }
        if (count_ >= kSlots / 2) clear();
        std::size_t i = h & mask_;
        while (slots_[i].key_len != kEmpty) i = (i + 1) & mask_;
        slots_[i] = Slot{static_cast<uint32_t>(h >> 32), static_cast<uint32_t>(keys_.size()),
                         static_cast<uint32_t>(word.size()), static_cast<uint32_t>(vals_.size()),
                         static_cast<uint32_t>(n)};
        keys_.append(word);
        vals_.insert(vals_.end(), ids, ids + n);
        ++count_;
    }

private:
    static constexpr std::size_t kSlots = std::size_t{1} << 17;
    static constexpr uint32_t kEmpty = 0xFFFFFFFFu;
    struct Slot {
        uint32_t hash = 0, key_off = 0, key_len = kEmpty, val_off = 0, val_len = 0;
    };
    void clear() {
        if (!slots_.empty()) std::fill(slots_.begin(), slots_.end(), Slot{});
        keys_.clear();
        vals_.clear();
        count_ = 0;
    }
    uint64_t owner_ = 0;
    std::vector<Slot> slots_;
    std::size_t mask_ = 0, count_ = 0;
    std::string keys_;
    std::vector<uint32_t> vals_;
};

struct EncodeState {
    WordCache cache;
    std::vector<uint32_t> scratch;
};

EncodeState& thread_state(const TokenizerImpl& impl) {
    thread_local EncodeState state;
    if (state.cache.owner() != impl.serial) state.cache.reset(impl.serial);
    return state;
}

// Short words: tiktoken's scan (find the lowest-ranked pair, merge, rescore its two neighbours).
// Quadratic in the word length but with tiny constants; used up to kShortWord bytes.
constexpr std::size_t kShortWord = 48;

void bpe_short(const TokenizerImpl& v, const unsigned char* p, std::size_t n, std::vector<uint32_t>& out) {
    uint32_t ids[kShortWord];
    uint32_t rank[kShortWord];  // rank[i]: rank of merging ids[i] with ids[i + 1]
    for (std::size_t i = 0; i < n; ++i) ids[i] = v.byte_id[p[i]];
    for (std::size_t i = 0; i + 1 < n; ++i) rank[i] = v.find_pair(ids[i], ids[i + 1]);
    std::size_t m = n;
    while (m > 1) {
        std::size_t best = 0;
        uint32_t best_rank = kNoToken;
        for (std::size_t i = 0; i + 1 < m; ++i) {
            if (rank[i] < best_rank) {
                best_rank = rank[i];
                best = i;
            }
        }
        if (best_rank == kNoToken) break;
        ids[best] = v.rank_id[best_rank];
        for (std::size_t i = best + 1; i + 1 < m; ++i) {
            ids[i] = ids[i + 1];
            rank[i] = rank[i + 1];
        }
        --m;
        if (best > 0) rank[best - 1] = v.find_pair(ids[best - 1], ids[best]);
        rank[best] = best + 1 < m ? v.find_pair(ids[best], ids[best + 1]) : kNoToken;
    }
    out.insert(out.end(), ids, ids + m);
}

// Long words (runs of spaces, long letter strings): a doubly linked list of parts and a min-heap of
// (rank, position) with lazy deletion, O(n log n). The heap order (rank, then position) picks the
// same pair as tiktoken's scan: the lowest rank, leftmost among equals. A heap entry is stale when its
// part is gone or the part's current pair rank differs (a part's pair only grows, so its rank changes).
void bpe_long(const TokenizerImpl& v, const unsigned char* p, std::size_t n, std::vector<uint32_t>& out) {
    std::vector<uint32_t> ids(n), rank(n), next(n), prev(n);
    using Entry = std::pair<uint32_t, uint32_t>;  // (rank, position)
    std::vector<Entry> heap_storage;
    heap_storage.reserve(n);
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap(std::greater<Entry>{},
                                                                          std::move(heap_storage));
    for (std::size_t i = 0; i < n; ++i) {
        ids[i] = v.byte_id[p[i]];
        next[i] = static_cast<uint32_t>(i + 1);
        prev[i] = static_cast<uint32_t>(i) - 1;  // wraps to kNoToken for i == 0
    }
    for (std::size_t i = 0; i + 1 < n; ++i) {
        rank[i] = v.find_pair(ids[i], ids[i + 1]);
        if (rank[i] != kNoToken) heap.emplace(rank[i], static_cast<uint32_t>(i));
    }
    rank[n - 1] = kNoToken;
    const uint32_t end = static_cast<uint32_t>(n);
    while (!heap.empty()) {
        const auto [r, i] = heap.top();
        heap.pop();
        if (ids[i] == kNoToken || rank[i] != r) continue;
        const uint32_t j = next[i];
        ids[i] = v.rank_id[r];
        ids[j] = kNoToken;
        next[i] = next[j];
        if (next[i] != end) prev[next[i]] = i;
        rank[i] = next[i] != end ? v.find_pair(ids[i], ids[next[i]]) : kNoToken;
        if (rank[i] != kNoToken) heap.emplace(rank[i], i);
        if (prev[i] != kNoToken) {
            const uint32_t h = prev[i];
            rank[h] = v.find_pair(ids[h], ids[i]);
            if (rank[h] != kNoToken) heap.emplace(rank[h], h);
        }
    }
    for (uint32_t i = 0; i != end; i = next[i]) out.push_back(ids[i]);
}

void encode_piece(const TokenizerImpl& v, std::string_view piece, EncodeState& st, std::vector<uint32_t>& out) {
    const auto* p = reinterpret_cast<const unsigned char*>(piece.data());
    const std::size_t n = piece.size();
    if (n == 1) {
        out.push_back(v.byte_id[p[0]]);
        return;
    }
    const uint64_t h = hash_bytes(p, n);
    // A piece that is itself a token is that token (tiktoken checks this before merging; Hugging Face
    // with ignore_merges).
    if (v.whole_word_first) {
        const uint32_t whole = v.find_token(p, n, h);
        if (whole != kNoToken) {
            out.push_back(whole);
            return;
        }
    }
    const bool cacheable = n <= WordCache::kMaxWordBytes;
    if (cacheable && st.cache.lookup(piece, h, out)) return;
    const std::size_t start = out.size();
    if (n <= kShortWord)
        bpe_short(v, p, n, out);
    else
        bpe_long(v, p, n, out);
    if (cacheable) st.cache.insert(piece, h, out.data() + start, out.size() - start);
}

template <std::size_t (*NextPiece)(std::string_view, std::size_t)>
void encode_pieces(const TokenizerImpl& v, std::string_view text, std::vector<uint32_t>& out) {
    EncodeState& st = thread_state(v);
    std::size_t pos = 0;
    while (pos < text.size()) {
        const std::size_t e = NextPiece(text, pos);
        encode_piece(v, text.substr(pos, e - pos), st, out);
        pos = e;
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
    if (max_id >= (1u << 24)) throw FormatError(fmt::format("{}: token id {} is too large (at most 16777215)", src, max_id));
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
                    throw FormatError(fmt::format("{}: model.merges[{}]: its {} is not a token of model.vocab", src, i, what));
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
    const std::size_t npairs = pow2_at_least(pairs.size() * 2);
    v.pair_keys.assign(npairs, ~uint64_t{0});
    v.pair_vals.assign(npairs, kNoToken);
    v.pair_mask = npairs - 1;
    for (const auto& [key, id] : pairs) {
        uint64_t i = pair_hash(key) & v.pair_mask;
        while (v.pair_keys[i] != ~uint64_t{0}) {
            if (v.pair_keys[i] == key && !list.merges.empty())
                throw FormatError(fmt::format("{}: model.merges[{}] repeats model.merges[{}]", src, id, v.pair_vals[i]));
            i = (i + 1) & v.pair_mask;
        }
        v.pair_keys[i] = key;
        v.pair_vals[i] = id;
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
