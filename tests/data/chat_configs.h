// Chat-template configs for tests: a Llama 3.1-style tokenizer_config.json written out (the statements of
// Meta's 3.1 Instruct template that ChatTemplate recognises and renders, without the tool branches).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace llmt::data {

// `extra` is appended to the template text.
inline std::string llama31_config(const std::string& extra = "") {
    const std::string tmpl =
        "{{- bos_token }}\n{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n"
        "{%- endif %}\n{%- if messages[0]['role'] == 'system' %}\n"
        "    {%- set system_message = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] %}\n"
        "{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n"
        "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
        "{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n"
        "{{- system_message }}\n{{- \"<|eot_id|>\" }}\n{%- for message in messages %}\n"
        "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
        "'<|eot_id|>' }}\n{%- endfor %}\n{%- if add_generation_prompt %}\n"
        "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n" + extra;
    nlohmann::json j = {{"bos_token", "<|begin_of_text|>"}, {"chat_template", tmpl}};
    return j.dump();
}

}  // namespace llmt::data
