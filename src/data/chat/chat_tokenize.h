// A conversation as training tokens: rendered with the model's chat template segment by segment
// (ChatTemplate::segments), markers as their special ids, the template's text and every message's content
// encoded as ordinary text (a user typing "<|eot_id|>" gets ordinary tokens, never the special one), and
// each token flagged when it is the assistant's own (docs/formats/chat_jsonl.md, "Tokens and targets").
#pragma once

#include <cstdint>
#include <vector>

#include "data/chat/chat_template.h"
#include "data/tokenizer/tokenizer.h"

namespace llmt::data {

struct TokenizedChat {
    std::vector<uint32_t> tokens;
    // 1 where tokens[i] is assistant content or the <|eot_id|> that ends an assistant turn, else 0.
    std::vector<uint8_t> assistant;
};

// Tokens of `messages` as the template renders them without a generation prompt (Llama 3's base
// template, which always ends with the assistant header, loses that trailing header: it has no target).
// For content without special-token text the tokens equal tok.encode(render(...), allow_special=true)
// (Llama 3's pre-tokenizer starts a new piece at every segment edge: docs/formats/chat_jsonl.md).
// Throws InputError naming the tokenizer when a marker of the template is not one of its tokens, and
// what ChatTemplate::segments throws.
TokenizedChat tokenize_chat(const ChatTemplate& tmpl, const Tokenizer& tok, const std::vector<ChatMessage>& messages);

}  // namespace llmt::data
