// The dashboard's static files (web/dist, built with npm by scripts/setup.d/50-web.sh; docs/server.md
// "Dashboard"): where the server finds them and how it serves them at / without a token. They hold no
// data; every /v1 call the page makes carries the bearer token the user gave it.
#pragma once

#include <filesystem>
#include <optional>

namespace llmt::server {

class Router;

// The first folder holding index.html of: `flag` (--web-dir: InputError when it lacks index.html),
// <this binary's dir>/../share/llmtrain/web (an installed layout, as in the container image), and the
// checkout's web/dist (its path compiled in). nullopt when none has been built.
std::optional<std::filesystem::path> find_web_dir(const std::filesystem::path& flag);

// Adds GET / and GET /<file> as the router's pages (API routes win). Every answer carries a
// Content-Security-Policy without inline scripts or styles. Without a folder, / answers 503 with what
// to run. Unknown files fall through to the API's 404 ("no_route").
void install_web_assets(Router& router, const std::optional<std::filesystem::path>& dir);

}  // namespace llmt::server
