// The --revision option of commands that take Hugging Face hub cache folders (models--ORG--NAME,
// datasets--ORG--NAME) as --model, --tokenizer or --input: which snapshot they resolve to
// (core/hub_cache.h), as transformers' and datasets' `revision` argument.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace llmt::cli {

// Adds `flag` (e.g. "--revision") to `cmd`, stored in `*revision` (default "main"); `inputs` names the
// options it applies to in the help.
void add_revision_option(CLI::App& cmd, std::string* revision, std::string_view flag, std::string_view inputs);

// Each of `paths` that is a hub cache folder (or in one) becomes its snapshot at `revision`. Throws
// InputError as resolve_hub_path, and when `revision` is not "main" while none of them is in a hub cache
// (`flag` and `inputs` name them in the message).
void resolve_hub_options(const std::string& revision, const std::vector<std::string*>& paths, std::string_view flag,
                         std::string_view inputs);

}  // namespace llmt::cli
