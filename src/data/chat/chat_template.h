// Chat templates: a conversation rendered to the text a chat model was fine-tuned on, byte-identical to
// transformers' tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=...) for
// the formats we know. There is no Jinja engine: the `chat_template` string of tokenizer_config.json is
// recognised as one of the known formats by the statements that define it, and anything else is refused
// naming the file, so a conversation is never rendered in a format the model was not trained on.
//
// Known formats:
//  - llama3: Meta's Llama 3 (3.0): bos_token, then per message
//    "<|start_header_id|>ROLE<|end_header_id|>\n\n" + trim(content) + "<|eot_id|>", then the assistant
//    header (always, in the base model's template; with add_generation_prompt in the Instruct one).
//  - llama3.1: Llama 3.1 / 3.2 / 3.3 without tools: bos_token, a system turn that always holds
//    "Cutting Knowledge Date: December 2023\nToday Date: DATE\n\n" + trim(system message), then the other
//    turns as llama3, then the assistant header with add_generation_prompt. DATE is the template's
//    date_string: "26 Jul 2024" unless set (3.2's template uses today's date when transformers offers
//    strftime_now; pass that date to match it).
#pragma once

#include <string>
#include <vector>

namespace llmt::data {

struct ChatMessage {
    std::string role;  // "system", "user", "assistant"
    std::string content;
};

enum class ChatFormat { kLlama3, kLlama31 };

// One piece of a rendered conversation, for tokenizing it piece by piece (data/chat/chat_tokenize.h): the
// template's markers ("<|begin_of_text|>", "<|start_header_id|>", "<|eot_id|>"...) are one special token
// each; the template's own text (a role name, "\n\n", llama3.1's date lines) and a message's content are
// ordinary text, content never parsed for special tokens.
struct ChatSegment {
    enum class Kind { kMarker, kTemplateText, kContent };
    Kind kind = Kind::kTemplateText;
    std::string text;
    // The assistant's own tokens: the content of an assistant message and the <|eot_id|> that ends it
    // (what a chat model is trained to produce). Headers, BOS and every other turn are false.
    bool assistant = false;
};

class ChatTemplate {
public:
    // Reads tokenizer_config.json: `chat_template` (a string, or a list of {name, template} with a
    // "default") and `bos_token` (a string or {"content": ...}). Throws InputError when the file is
    // missing, FormatError naming the file and key for a template that is none of the known formats.
    static ChatTemplate load(const std::string& tokenizer_config_path);
    // The same from the file's text; `path` names it in messages.
    static ChatTemplate parse(const std::string& json_text, const std::string& path);

    // The prompt text. Throws InputError for an empty conversation or a role other than system, user
    // and assistant. (llama3.1: only a first system message goes into the dated system turn; a later one
    // is a turn of its own, as the template renders it.)
    std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
    // The same text cut into segments: render() is their concatenation. Throws as render().
    std::vector<ChatSegment> segments(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
    // Whether render() ends every conversation with the assistant header, asked or not (Llama 3's base
    // template); a training example leaves that trailing header out (it holds no target).
    bool always_adds_generation_prompt() const { return always_generation_prompt_; }

    ChatFormat format() const { return format_; }
    const char* format_name() const { return format_ == ChatFormat::kLlama3 ? "llama3" : "llama3.1"; }
    // llama3.1's "Today Date" (default "26 Jul 2024", the template's own); ignored by llama3's format.
    void set_date_string(std::string date) { date_ = std::move(date); }
    const std::string& date_string() const { return date_; }
    // Text of the token that ends a turn ("<|eot_id|>"): generation stops there.
    const std::string& end_of_turn() const { return eot_; }

private:
    ChatFormat format_ = ChatFormat::kLlama3;
    bool always_generation_prompt_ = false;
    std::string bos_, date_ = "26 Jul 2024", eot_ = "<|eot_id|>", path_;
};

// Python's str.strip() (what Jinja's trim filter runs): removes leading and trailing characters for
// which str.isspace() is true (Unicode White_Space, plus U+001C..U+001F).
std::string python_strip(const std::string& s);

}  // namespace llmt::data
