// Chat JSONL (docs/formats/chat_jsonl.md): one conversation a line, either {"messages": [{"role",
// "content"}, ...]} (roles system, user, assistant; multi-turn) or {"prompt": "...", "completion": "..."}
// (a user turn, then an assistant turn). Every malformed line is an error naming the file, the 1-based
// line and the field, never skipped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat/chat_template.h"

namespace llmt::data {

struct ChatRecord {
    std::vector<ChatMessage> messages;
    uint64_t line = 0;  // 1-based line of the file it came from
};

// Parses one line; `where` ("file.jsonl:12") starts every message. Throws FormatError when the line is
// blank, not JSON (core/json_parse.h, bounded), not an object, has both or neither of `messages` and
// `prompt`/`completion`, a field of the wrong type, a message with a role other than system, user or
// assistant or with keys other than role and content, an empty `messages` list or an empty (after
// trimming) prompt or completion, or no assistant message. Other top-level keys (an id, a source) are
// ignored.
std::vector<ChatMessage> parse_chat_record(std::string_view line, const std::string& where);

// Every record of a chat JSONL text, in order; `path` names it in messages. A final line without '\n'
// is a line; a "\r\n" ending is accepted. Throws as parse_chat_record.
std::vector<ChatRecord> parse_chat_jsonl(std::string_view text, const std::string& path);

}  // namespace llmt::data
