// tokenize_chat (chat_tokenize.h): segment by segment, markers by id, content without special parsing.
#include "data/chat/chat_tokenize.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>

#include "core/error.h"

namespace llmt::data {
namespace {

uint32_t marker_id(const Tokenizer& tok, const std::string& marker) {
    const uint32_t id = tok.token_id(marker);
    if (id == 0xFFFFFFFFu)
        throw InputError(
            fmt::format("chat data: the tokenizer {} has no token \"{}\", which the chat template writes; "
                        "use the tokenizer of the model the template belongs to",
                        tok.source_path(), marker));
    return id;
}

// The training example stops at the last <|eot_id|>: what follows is a generation prompt.
void drop_trailing_generation_prompt(std::vector<ChatSegment>& segs) {
    while (!segs.empty() && !(segs.back().kind == ChatSegment::Kind::kMarker && segs.back().text == "<|eot_id|>"))
        segs.pop_back();
}

}  // namespace

TokenizedChat tokenize_chat(const ChatTemplate& tmpl, const Tokenizer& tok, const std::vector<ChatMessage>& messages) {
    std::vector<ChatSegment> segs = tmpl.segments(messages, /*add_generation_prompt=*/false);
    drop_trailing_generation_prompt(segs);
    TokenizedChat out;
    for (const auto& s : segs) {
        const std::size_t before = out.tokens.size();
        if (s.kind == ChatSegment::Kind::kMarker) {
            out.tokens.push_back(marker_id(tok, s.text));
        } else {
            tok.encode_into(s.text, /*allow_special=*/false, out.tokens);
        }
        out.assistant.resize(out.tokens.size(), 0);
        if (s.assistant)
            std::fill(out.assistant.begin() + static_cast<std::ptrdiff_t>(before), out.assistant.end(), 1);
    }
    return out;
}

}  // namespace llmt::data
