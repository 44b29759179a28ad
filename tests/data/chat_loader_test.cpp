// Chat rows and loaders (data/chat/chat_rows.h, data/chat/chat_loader.h) on synthetic examples: packing (Best-Fit
// Decreasing), positions, targets and pad; truncation; W=2 ranks of B rows = 1 rank of 2B rows; exact
// state/restore; the evaluation loader; the target counts of the coming micro-batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/chat/chat_loader.h"

namespace llmt::data {
namespace {

constexpr uint32_t kPad = 7;

// Example e of n tokens: token i is 100*e + i + 10; the second half of it is the assistant's.
TokenizedChat example(uint32_t e, uint32_t n, uint32_t assistant_from = 0xFFFFFFFF) {
    TokenizedChat t;
    if (assistant_from == 0xFFFFFFFF) assistant_from = n / 2;
    for (uint32_t i = 0; i < n; ++i) {
        t.tokens.push_back(100 * e + i + 10);
        t.assistant.push_back(i >= assistant_from ? 1 : 0);
    }
    return t;
}

ChatData make_data(const std::vector<uint32_t>& lengths, std::vector<uint32_t> val = {}) {
    auto ds = std::make_shared<ChatDataset>();
    for (uint32_t e = 0; e < lengths.size(); ++e) ds->append(example(e, lengths[e]));
    ChatData d;
    d.examples = ds;
    for (uint32_t e = 0; e < lengths.size(); ++e)
        (std::find(val.begin(), val.end(), e) != val.end() ? d.val : d.train).push_back(e);
    d.key = "k";
    d.pad_id = kPad;
    d.vocab_size = 100000;
    return d;
}

struct Buffers {
    std::vector<int32_t> x, y, pos;
    ChatBatch b;
    explicit Buffers(int B, int T) : x(static_cast<size_t>(B) * T), y(x.size()), pos(x.size()) {}
};

Buffers next_of(ChatLoader& l, int B, int T) {
    Buffers out(B, T);
    out.b = l.next(out.x.data(), out.y.data(), out.pos.data());
    return out;
}

TEST(ChatRows, BestFitDecreasingAsTrl) {
    // Longest first: 7 opens row 0, 5 row 1, 4 row 2; 3 fits rows 1 (3 free) and 2 (4 free): best fit is
    // row 1; 2 goes to row 2 (4 free, row 0 has 1); 1 fills row 0.
    const std::vector<uint32_t> lengths = {5, 3, 7, 2, 4, 1};
    EXPECT_EQ(best_fit_decreasing(lengths, 8), (std::vector<std::vector<uint32_t>>{{2, 5}, {0, 1}, {4, 3}}));
    // Ties keep input order; equal free space goes to the row opened first.
    EXPECT_EQ(best_fit_decreasing(std::vector<uint32_t>{2, 2, 2, 2, 1}, 3),
              (std::vector<std::vector<uint32_t>>{{0, 4}, {1}, {2}, {3}}));
}

TEST(ChatRows, PackedRowPositionsTargetsAndPad) {
    // 5, 4 and 3 tokens: 4, 3 and 2 slots. In T = 8: row 0 = examples 0 and 1 (7 slots), row 1 = example 2.
    const ChatData d = make_data({5, 4, 3});
    const ChatRows rows(*d.examples, d.train, 8, /*packing=*/true);
    ASSERT_EQ(rows.size(), 2u);
    std::vector<int32_t> x(8), y(8), p(8);
    rows.fill(*d.examples, 0, 8, kPad, x.data(), y.data(), p.data());
    EXPECT_EQ(x, (std::vector<int32_t>{10, 11, 12, 13, 110, 111, 112, kPad}));
    EXPECT_EQ(p, (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 0}));
    // Example 0 (assistant from token 2): slots 1..3 predict tokens 12, 13, 14. Example 1 (from token 2):
    // slots 1, 2 predict 112, 113. The pad slot and the slots before the assistant's tokens: -1.
    EXPECT_EQ(y, (std::vector<int32_t>{-1, 12, 13, 14, -1, 112, 113, -1}));
    EXPECT_EQ(rows.targets(0), 5u);
    EXPECT_EQ(rows.slots(0), 7u);
    rows.fill(*d.examples, 1, 8, kPad, x.data(), y.data(), p.data());
    EXPECT_EQ(x, (std::vector<int32_t>{210, 211, kPad, kPad, kPad, kPad, kPad, kPad}));
    EXPECT_EQ(p, (std::vector<int32_t>{0, 1, 0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(y, (std::vector<int32_t>{211, 212, -1, -1, -1, -1, -1, -1}));
    EXPECT_EQ(rows.stats().slots, 9u);
    EXPECT_EQ(rows.stats().targets, 7u);
}

// Each example's slots in a packed row are exactly its slots alone in a row: the same inputs, targets
// and positions from 0, so with attention bounded by the positions its loss cannot change.
TEST(ChatRows, PackedExampleSlotsEqualTheExampleAlone) {
    std::vector<uint32_t> lengths;
    for (uint32_t e = 0; e < 19; ++e) lengths.push_back(2 + (e * 5) % 13);
    const ChatData d = make_data(lengths);
    const ChatRows packed(*d.examples, d.train, 16, /*packing=*/true);
    EXPECT_LT(packed.size(), d.train.size());
    std::size_t pieces = 0;
    for (std::size_t r = 0; r < packed.size(); ++r) {
        std::vector<int32_t> x(16), y(16), p(16);
        packed.fill(*d.examples, r, 16, kPad, x.data(), y.data(), p.data());
        int at = 0;
        for (const ChatPiece& piece : packed.pieces(r)) {
            const std::vector<uint32_t> one = {piece.example};
            const ChatRows alone(*d.examples, one, 16, /*packing=*/false);
            const int n = static_cast<int>(piece.slots);
            std::vector<int32_t> ax(16), ay(16), ap(16);
            alone.fill(*d.examples, 0, n, kPad, ax.data(), ay.data(), ap.data());
            EXPECT_EQ(std::vector<int32_t>(x.begin() + at, x.begin() + at + n),
                      std::vector<int32_t>(ax.begin(), ax.begin() + n));
            EXPECT_EQ(std::vector<int32_t>(y.begin() + at, y.begin() + at + n),
                      std::vector<int32_t>(ay.begin(), ay.begin() + n));
            EXPECT_EQ(std::vector<int32_t>(p.begin() + at, p.begin() + at + n),
                      std::vector<int32_t>(ap.begin(), ap.begin() + n));
            EXPECT_EQ(p[static_cast<std::size_t>(at)], 0);
            at += n;
            ++pieces;
        }
        EXPECT_EQ(static_cast<uint32_t>(at), packed.slots(r));
    }
    EXPECT_EQ(pieces, d.train.size());  // every example in exactly one row
}

TEST(ChatRows, LongExamplesAreTruncatedOrDroppedAndCounted) {
    auto ds = std::make_shared<ChatDataset>();
    ds->append(example(0, 20, /*assistant_from=*/3));   // cut to 9 tokens: targets left (tokens 3..8)
    ds->append(example(1, 20, /*assistant_from=*/15));  // cut to 9 tokens: no assistant token left
    ds->append(example(2, 9));                           // exactly T+1 tokens: whole
    const std::vector<uint32_t> all = {0, 1, 2};
    const ChatRows rows(*ds, all, 8, /*packing=*/false);
    EXPECT_EQ(rows.stats().truncated, 2u);
    EXPECT_EQ(rows.stats().dropped, 1u);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows.slots(0), 8u);
    EXPECT_EQ(rows.targets(0), 6u);
    EXPECT_EQ(rows.pieces(1)[0].example, 2u);
    EXPECT_NE(rows.stats().summary(8).find("2 truncated to 9 tokens (1 dropped: no target left)"), std::string::npos)
        << rows.stats().summary(8);
}

TEST(ChatLoader, UnpackedRowsArePaddedToTheLongestOfTheBatch) {
    const ChatData d = make_data({5, 3, 9, 4});
    ChatLoader l(d, {.B = 2, .T = 16, .seed = 1, .shuffle = false, .packing = false, .vocab_size = 1000});
    const Buffers a = next_of(l, 2, 16);  // examples 0 and 1: 4 and 2 slots
    EXPECT_EQ(a.b.T, 4);
    EXPECT_EQ(a.b.targets, 3 + 2);
    EXPECT_EQ(std::vector<int32_t>(a.x.begin(), a.x.begin() + 8),
              (std::vector<int32_t>{10, 11, 12, 13, 110, 111, kPad, kPad}));
    EXPECT_EQ(std::vector<int32_t>(a.pos.begin(), a.pos.begin() + 8), (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 0, 1}));
    const Buffers b = next_of(l, 2, 16);  // examples 2 and 3: 8 and 3 slots
    EXPECT_EQ(b.b.T, 8);
    // With packing, every batch is T slots wide.
    ChatLoader packed(d, {.B = 1, .T = 16, .packing = true, .vocab_size = 1000});
    EXPECT_EQ(next_of(packed, 1, 16).b.T, 16);
}

// Rows of a batch, each cut to `width` slots (pad beyond a row's own width is checked by the caller).
std::vector<std::vector<int32_t>> rows_of(const std::vector<int32_t>& v, int B, int T, int width) {
    std::vector<std::vector<int32_t>> out;
    for (int j = 0; j < B; ++j) out.emplace_back(v.begin() + j * T, v.begin() + j * T + width);
    return out;
}

TEST(ChatLoader, TwoRanksOfBRowsAreOneRankOfTwoB) {
    std::vector<uint32_t> lengths;
    for (uint32_t e = 0; e < 23; ++e) lengths.push_back(3 + (e * 7) % 11);
    const ChatData d = make_data(lengths);
    for (bool packing : {false, true}) {
        const ChatLoaderOptions one{
            .B = 6, .T = 16, .rank = 0, .world = 1, .seed = 5, .packing = packing, .vocab_size = 10000};
        ChatLoaderOptions r0 = one, r1 = one;
        r0.B = r1.B = 3;
        r0.world = r1.world = 2;
        r1.rank = 1;
        ChatLoader l(d, one), a(d, r0), b(d, r1);
        // Several epochs: the rows are fewer than the steps' rows.
        for (int step = 0; step < 9; ++step) {
            const int64_t step_targets = l.global_targets_ahead(2);
            EXPECT_EQ(a.global_targets_ahead(2), step_targets);
            EXPECT_EQ(b.global_targets_ahead(2), step_targets);
            EXPECT_EQ(a.targets_ahead(2) + b.targets_ahead(2), step_targets);
            EXPECT_EQ(l.targets_ahead(2), step_targets);
            const ChatBatch peeked = a.peek(0);
            const Buffers whole = next_of(l, 6, 16), p0 = next_of(a, 3, 16), p1 = next_of(b, 3, 16);
            EXPECT_EQ(peeked.T, p0.b.T);
            EXPECT_EQ(peeked.targets, p0.b.targets);
            EXPECT_EQ(p0.b.targets + p1.b.targets, whole.b.targets);
            for (auto f : {&Buffers::x, &Buffers::y, &Buffers::pos}) {
                auto w = rows_of(whole.*f, 6, whole.b.T, whole.b.T);
                auto h0 = rows_of(p0.*f, 3, p0.b.T, p0.b.T), h1 = rows_of(p1.*f, 3, p1.b.T, p1.b.T);
                h0.insert(h0.end(), h1.begin(), h1.end());
                for (int j = 0; j < 6; ++j) {
                    // A rank pads to its own longest row: compare the common width; the rest is the pad tail.
                    const std::size_t n = std::min(w[j].size(), h0[j].size());
                    EXPECT_EQ(std::vector<int32_t>(w[j].begin(), w[j].begin() + n),
                              std::vector<int32_t>(h0[j].begin(), h0[j].begin() + n))
                        << "packing " << packing << " step " << step << " row " << j;
                    if (f == &Buffers::y) {
                        for (std::size_t i = n; i < w[j].size(); ++i) EXPECT_EQ(w[j][i], -1);
                    }
                }
            }
        }
        EXPECT_EQ(a.state(), l.state());
        EXPECT_EQ(b.state(), l.state());
    }
}

TEST(ChatLoader, RestoreResumesExactly) {
    std::vector<uint32_t> lengths;
    for (uint32_t e = 0; e < 17; ++e) lengths.push_back(4 + (e * 5) % 9);
    const ChatData d = make_data(lengths);
    const ChatLoaderOptions o{.B = 3, .T = 12, .seed = 9, .packing = true, .vocab_size = 10000};
    ChatLoader run(d, o);
    for (int i = 0; i < 5; ++i) (void)next_of(run, 3, 12);
    const nlohmann::json saved = nlohmann::json::parse(run.state().dump());
    ChatLoader resumed(d, o);
    resumed.restore(saved);
    for (int i = 0; i < 6; ++i) {
        const Buffers u = next_of(run, 3, 12), r = next_of(resumed, 3, 12);
        EXPECT_EQ(u.x, r.x);
        EXPECT_EQ(u.y, r.y);
        EXPECT_EQ(u.pos, r.pos);
    }
    // A state of other settings or data is refused by the field's name.
    auto refused = [&](nlohmann::json s, const std::string& field) {
        ChatLoader l(d, o);
        try {
            l.restore(s);
            ADD_FAILURE() << "restored " << s.dump();
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find("'" + field + "'"), std::string::npos) << e.what();
        }
    };
    auto with = [&](const char* k, nlohmann::json v) {
        nlohmann::json s = saved;
        if (v.is_null()) s.erase(k);
        else s[k] = v;
        return s;
    };
    refused(with("packing", false), "packing");
    refused(with("seq_len", 16), "seq_len");
    refused(with("data_key", "other"), "data_key");
    refused(with("position", nullptr), "position");
    refused(with("cursor", 1000), "epoch");
}

TEST(ChatEvalLoader, EveryValidationRowOnceTheLastBatchPadded) {
    const ChatData d = make_data({5, 6, 7, 8, 9, 4, 3}, /*val=*/{1, 2, 4, 5, 6});
    const ChatEvalOptions o{.B = 2, .T = 8, .world = 2, .packing = false, .vocab_size = 1000};
    ChatEvalOptions o1 = o;
    o1.rank = 1;
    const ChatEvalLoader r0(d, o), r1(d, o1);
    ASSERT_EQ(r0.num_batches(), 2u);  // 5 rows over 4 a batch
    std::vector<uint32_t> seen;
    int64_t targets = 0;
    for (std::size_t b = 0; b < r0.num_batches(); ++b) {
        EXPECT_EQ(r0.global_targets(b), r0.info(b).targets + r1.info(b).targets);
        for (const ChatEvalLoader* l : {&r0, &r1}) {
            Buffers buf(2, 8);
            const ChatBatch got = l->batch(b, buf.x.data(), buf.y.data(), buf.pos.data());
            targets += got.targets;
            for (int j = 0; j < 2; ++j)
                if (buf.x[static_cast<std::size_t>(j * got.T)] != static_cast<int32_t>(kPad))
                    seen.push_back(static_cast<uint32_t>(buf.x[static_cast<std::size_t>(j * got.T)] - 10) / 100);
        }
    }
    EXPECT_EQ(seen, (std::vector<uint32_t>{1, 2, 4, 5, 6}));
    EXPECT_EQ(targets, static_cast<int64_t>(r0.stats().targets));
}

TEST(ChatLoader, RefusesIdsBeyondTheModelsVocabulary) {
    const ChatData d = make_data({5, 6});
    try {
        ChatLoader l(d, {.B = 1, .T = 8, .vocab_size = 112});
        FAIL() << "token 112 accepted with vocab_size 112";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("token id 112 is not below model.vocab_size 112"), std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace llmt::data
