// Chat JSONL records (chat_records.h): bounded JSON per line, each field checked with its path.
#include "data/chat/chat_records.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_describe.h"
#include "core/json_parse.h"

namespace llmt::data {
namespace {

// A chat line is small; the limit only stops a runaway line (a whole file without newlines).
constexpr JsonLimits kChatLineLimits{std::size_t{64} << 20, 16, true};

bool is_blank(std::string_view s) {
    return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

const std::string& string_field(const nlohmann::json& obj, const std::string& key, const std::string& where,
                                const std::string& field_path) {
    const auto it = obj.find(key);
    if (it == obj.end()) throw FormatError(fmt::format("{}: field \"{}\" is missing", where, field_path));
    if (!it->is_string())
        throw FormatError(
            fmt::format("{}: field \"{}\" is {}, expected a string", where, field_path, describe_json(*it)));
    return it->get_ref<const std::string&>();
}

ChatMessage parse_message(const nlohmann::json& m, std::size_t i, const std::string& where) {
    const std::string path = fmt::format("messages[{}]", i);
    if (!m.is_object())
        throw FormatError(fmt::format("{}: field \"{}\" is {}, expected an object {{\"role\", \"content\"}}", where,
                                      path, describe_json(m)));
    for (auto it = m.begin(); it != m.end(); ++it)
        if (it.key() != "role" && it.key() != "content")
            throw FormatError(
                fmt::format("{}: field \"{}.{}\" is not read; a message holds only \"role\" and \"content\"", where,
                            path, it.key()));
    ChatMessage msg{string_field(m, "role", where, path + ".role"),
                    string_field(m, "content", where, path + ".content")};
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant")
        throw FormatError(
            fmt::format("{}: field \"{}.role\" is \"{}\", expected system, user or assistant", where, path, msg.role));
    return msg;
}

std::vector<ChatMessage> parse_messages(const nlohmann::json& list, const std::string& where) {
    if (!list.is_array())
        throw FormatError(fmt::format("{}: field \"messages\" is {}, expected a list of {{\"role\", \"content\"}}",
                                      where, describe_json(list)));
    if (list.empty()) throw FormatError(fmt::format("{}: field \"messages\" is an empty list", where));
    std::vector<ChatMessage> out;
    for (std::size_t i = 0; i < list.size(); ++i) out.push_back(parse_message(list[i], i, where));
    return out;
}

std::vector<ChatMessage> parse_prompt_completion(const nlohmann::json& obj, const std::string& where) {
    ChatMessage user{"user", string_field(obj, "prompt", where, "prompt")};
    ChatMessage assistant{"assistant", string_field(obj, "completion", where, "completion")};
    // The template trims content, so whitespace alone would train an empty turn.
    for (const auto* m : {&user, &assistant})
        if (python_strip(m->content).empty())
            throw FormatError(fmt::format("{}: field \"{}\" is empty", where, m == &user ? "prompt" : "completion"));
    return {user, assistant};
}

}  // namespace

std::vector<ChatMessage> parse_chat_record(std::string_view line, const std::string& where) {
    if (is_blank(line))
        throw FormatError(fmt::format("{}: the line is empty, expected a JSON object with \"messages\" or "
                                      "\"prompt\" and \"completion\"",
                                      where));
    const nlohmann::json obj = parse_json(line, where, kChatLineLimits);
    if (!obj.is_object())
        throw FormatError(fmt::format("{}: expected a JSON object with \"messages\" or \"prompt\" and \"completion\", "
                                      "found {}",
                                      where, describe_json(obj)));
    const bool has_messages = obj.contains("messages");
    const bool has_pair = obj.contains("prompt") || obj.contains("completion");
    if (has_messages && has_pair)
        throw FormatError(
            fmt::format("{}: field \"messages\" and field \"{}\" are both present; a record is one or the "
                        "other",
                        where, obj.contains("prompt") ? "prompt" : "completion"));
    if (!has_messages && !has_pair)
        throw FormatError(fmt::format("{}: field \"messages\" is missing (expected \"messages\", or \"prompt\" and "
                                      "\"completion\")",
                                      where));
    std::vector<ChatMessage> messages =
        has_messages ? parse_messages(obj["messages"], where) : parse_prompt_completion(obj, where);
    bool has_assistant = false;
    for (const auto& m : messages) has_assistant = has_assistant || m.role == "assistant";
    if (!has_assistant)
        throw FormatError(fmt::format("{}: field \"messages\" has no assistant message, so the record has nothing to "
                                      "train on",
                                      where));
    return messages;
}

std::vector<ChatRecord> parse_chat_jsonl(std::string_view text, const std::string& path) {
    std::vector<ChatRecord> out;
    uint64_t line_no = 0;
    std::size_t at = 0;
    while (at < text.size()) {
        const std::size_t nl = text.find('\n', at);
        const std::size_t end = nl == std::string_view::npos ? text.size() : nl;
        std::string_view line = text.substr(at, end - at);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        ++line_no;
        out.push_back({parse_chat_record(line, fmt::format("{}:{}", path, line_no)), line_no});
        at = end + 1;
    }
    return out;
}

}  // namespace llmt::data
