// Chat templates recognised by their defining statements (chat_template.h), rendered by hand.
#include "data/chat/chat_template.h"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"

namespace llmt::data {
namespace {

// The statements each known format is made of, as they appear in Meta's templates (after Jinja's "\n"
// escapes are read as newlines: some files write the newline itself, others the escape).
// llama3: every message is header + trimmed content + <|eot_id|>, the BOS before the first.
constexpr const char* kLlama3Turn =
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>'";
constexpr const char* kLlama3Bos = "bos_token + content";
constexpr const char* kAssistantHeader = "'<|start_header_id|>assistant<|end_header_id|>\n\n'";
// llama3.1 adds the system block with the knowledge and today's date.
constexpr const char* kLlama31Knowledge = "\"Cutting Knowledge Date: December 2023\n\"";
constexpr const char* kLlama31Today = "\"Today Date: \" + date_string + \"\n\n\"";
constexpr const char* kLlama31System = "set system_message = messages[0]['content']|trim";

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Code point at s[i] (valid UTF-8 assumed; anything else is one byte) and its length.
uint32_t cp_at(const std::string& s, std::size_t i, std::size_t* len) {
    const auto c = static_cast<unsigned char>(s[i]);
    auto cont = [&](std::size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F); };
    if (c < 0x80) {
        *len = 1;
        return c;
    }
    if ((c & 0xE0) == 0xC0 && i + 1 < s.size()) {
        *len = 2;
        return ((c & 0x1Fu) << 6) | cont(1);
    }
    if ((c & 0xF0) == 0xE0 && i + 2 < s.size()) {
        *len = 3;
        return ((c & 0x0Fu) << 12) | (cont(1) << 6) | cont(2);
    }
    if ((c & 0xF8) == 0xF0 && i + 3 < s.size()) {
        *len = 4;
        return ((c & 0x07u) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    }
    *len = 1;
    return 0xFFFFFFFFu;
}

bool python_isspace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace

std::string python_strip(const std::string& s) {
    std::size_t begin = 0, end = 0, i = 0;
    bool seen = false;
    while (i < s.size()) {
        std::size_t len;
        const bool space = python_isspace(cp_at(s, i, &len));
        if (!space) {
            if (!seen) begin = i;
            seen = true;
            end = i + len;
        }
        i += len;
    }
    return seen ? s.substr(begin, end - begin) : std::string();
}

ChatTemplate ChatTemplate::load(const std::string& tokenizer_config_path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(tokenizer_config_path, ec))
        throw InputError(fmt::format("{}: no such file (the chat template comes from the model's "
                                     "tokenizer_config.json)",
                                     tokenizer_config_path));
    return parse(read_file(tokenizer_config_path), tokenizer_config_path);
}

ChatTemplate ChatTemplate::parse(const std::string& json_text, const std::string& path) {
    // nlohmann's own parser, not parse_json: transformers writes model_max_length as int(1e30), an integer
    // beyond 64 bits that parse_json refuses (nlohmann reads it as a double; we never read that key).
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(json_text);
    } catch (const nlohmann::json::parse_error& e) {
        throw FormatError(fmt::format("{}: invalid JSON at byte {}", path, e.byte));
    }
    auto fail = [&](const std::string& key, const std::string& what) {
        return FormatError(fmt::format("{}: {}: {}", path, key, what));
    };
    if (!j.is_object()) throw fail("(top level)", "expected a JSON object (a tokenizer_config.json)");
    ChatTemplate t;
    t.path_ = path;
    auto it = j.find("chat_template");
    if (it == j.end() || it->is_null())
        throw fail("chat_template", "missing; the model has no chat template (a base model?), so llmtrain cannot "
                                    "render a conversation for it");
    std::string tmpl;
    if (it->is_string()) {
        tmpl = it->get<std::string>();
    } else if (it->is_array()) {
        for (const auto& e : *it) {
            if (e.is_object() && e.value("name", "") == "default" && e.contains("template") &&
                e["template"].is_string())
                tmpl = e["template"].get<std::string>();
        }
        if (tmpl.empty()) throw fail("chat_template", "a list without a \"default\" template");
    } else {
        throw fail("chat_template", "is neither a string nor a list of {name, template}");
    }
    auto bos = j.find("bos_token");
    if (bos != j.end() && bos->is_string()) {
        t.bos_ = bos->get<std::string>();
    } else if (bos != j.end() && bos->is_object() && bos->contains("content") && (*bos)["content"].is_string()) {
        t.bos_ = (*bos)["content"].get<std::string>();
    } else {
        throw fail("bos_token", "missing or neither a string nor {\"content\": ...}; the template starts with it");
    }
    for (std::size_t at = tmpl.find("\\n"); at != std::string::npos; at = tmpl.find("\\n", at + 1))
        tmpl.replace(at, 2, 1, '\n');
    if (has(tmpl, kLlama31Knowledge) && has(tmpl, kLlama31Today) && has(tmpl, kLlama31System) &&
        has(tmpl, "message['content'] | trim + '<|eot_id|>'") && has(tmpl, kAssistantHeader) &&
        has(tmpl, "add_generation_prompt")) {
        t.format_ = ChatFormat::kLlama31;
    } else if (has(tmpl, kLlama3Turn) && has(tmpl, kLlama3Bos) && has(tmpl, kAssistantHeader) &&
               !has(tmpl, "Cutting Knowledge") && !has(tmpl, "tools")) {
        t.format_ = ChatFormat::kLlama3;
        // The base model's template adds the assistant header unconditionally; the Instruct one only
        // with add_generation_prompt.
        t.always_generation_prompt_ = !has(tmpl, "add_generation_prompt");
    } else {
        throw fail("chat_template", "not a format llmtrain knows (Llama 3's and Llama 3.1/3.2's are; there is no "
                                    "Jinja engine, so other templates are refused rather than rendered wrongly)");
    }
    return t;
}

std::vector<ChatSegment> ChatTemplate::segments(const std::vector<ChatMessage>& messages,
                                                bool add_generation_prompt) const {
    if (messages.empty()) throw InputError("chat: the conversation has no messages");
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const std::string& r = messages[i].role;
        if (r != "system" && r != "user" && r != "assistant")
            throw InputError(
                fmt::format("chat: message {} has role \"{}\"; expected system, user or assistant", i, r));
    }
    using Kind = ChatSegment::Kind;
    std::vector<ChatSegment> out;
    auto marker = [&](const char* m, bool assistant = false) { out.push_back({Kind::kMarker, m, assistant}); };
    auto text = [&](std::string t) { out.push_back({Kind::kTemplateText, std::move(t), false}); };
    auto header = [&](const std::string& role) {
        marker("<|start_header_id|>");
        text(role);
        marker("<|end_header_id|>");
        text("\n\n");
    };
    auto turn = [&](const std::string& role, std::string preamble, const std::string& content) {
        const bool assistant = role == "assistant";
        header(role);
        if (!preamble.empty()) text(std::move(preamble));
        out.push_back({Kind::kContent, python_strip(content), assistant});
        marker("<|eot_id|>", assistant);
    };
    out.push_back({Kind::kMarker, bos_, false});
    std::size_t first = 0;
    if (format_ == ChatFormat::kLlama31) {
        const bool has_system = messages[0].role == "system";
        turn("system", "Cutting Knowledge Date: December 2023\nToday Date: " + date_ + "\n\n",
             has_system ? messages[0].content : std::string());
        first = has_system ? 1 : 0;
    }
    for (std::size_t i = first; i < messages.size(); ++i) turn(messages[i].role, "", messages[i].content);
    if (add_generation_prompt || always_generation_prompt_) header("assistant");
    // Empty pieces (an empty message) tokenize to nothing; leave them out.
    std::erase_if(out, [](const ChatSegment& s) { return s.text.empty(); });
    return out;
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
    std::string out;
    for (const auto& s : segments(messages, add_generation_prompt)) out += s.text;
    return out;
}

}  // namespace llmt::data
