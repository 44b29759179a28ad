// Serving the dashboard's built files from a folder; see web_assets.h. Files are read on each request
// (a rebuilt web/dist shows without restarting the server) and only names of [A-Za-z0-9._-] segments
// with a known extension are served, resolved inside the folder.
#include "server/routes/web_assets.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/fs.h"
#include "server/http/response.h"
#include "server/routes/router.h"

#ifndef LLMT_WEB_DIST_DIR
#define LLMT_WEB_DIST_DIR ""
#endif

namespace llmt::server {

namespace fs = std::filesystem;

namespace {

// No inline scripts or styles, nothing from other origins; the page only talks to this server.
constexpr const char* kCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const char* content_type(const fs::path& p) {
    const std::string ext = p.extension().string();
    if (ext == ".html") return "text/html; charset=utf-8";
    if (ext == ".js") return "text/javascript; charset=utf-8";
    if (ext == ".css") return "text/css; charset=utf-8";
    if (ext == ".json" || ext == ".map") return "application/json";
    if (ext == ".svg") return "image/svg+xml";
    if (ext == ".png") return "image/png";
    if (ext == ".ico") return "image/x-icon";
    if (ext == ".txt") return "text/plain; charset=utf-8";
    return nullptr;
}

void set_security_headers(http::Response& res) {
    res.set_header("Content-Security-Policy", kCsp);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("Cache-Control", "no-cache");
}

bool has_index(const fs::path& dir) {
    std::error_code ec;
    return fs::is_regular_file(dir / "index.html", ec);
}

}  // namespace

std::optional<fs::path> find_web_dir(const fs::path& flag) {
    if (!flag.empty()) {
        if (!has_index(flag))
            throw InputError(fmt::format("--web-dir {}: no index.html there (build the dashboard with "
                                         "scripts/setup.sh, or cd web && npm ci && npm run build)",
                                         flag.string()));
        return fs::absolute(flag);
    }
    std::error_code ec;
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (!ec && has_index(self.parent_path() / "../share/llmtrain/web"))
        return fs::weakly_canonical(self.parent_path() / "../share/llmtrain/web", ec);
    fs::path checkout = LLMT_WEB_DIST_DIR;
    if (!checkout.empty() && has_index(checkout)) return checkout;
    return std::nullopt;
}

void install_web_assets(Router& router, const std::optional<fs::path>& dir) {
    if (!dir) {
        router.add_page({"/", [](const http::Request&, http::Response& res) {
            set_security_headers(res);
            res.status = 503;
            res.set_content("The llmtrain dashboard is not built, so this server has nothing to show at /.\n"
                            "Build it with scripts/setup.sh (or: cd web && npm ci && npm run build) and restart,\n"
                            "or pass --web-dir DIR. The API under /v1 works without it.\n",
                            "text/plain; charset=utf-8");
        }});
        return;
    }
    const fs::path root = fs::weakly_canonical(*dir);
    auto serve = [root](const std::string& rel, http::Response& res) {
        std::error_code ec;
        fs::path full = fs::canonical(root / rel, ec);
        const std::string prefix = root.string() + "/";
        const char* type = content_type(full);
        if (ec || type == nullptr || full.string().compare(0, prefix.size(), prefix) != 0 ||
            !fs::is_regular_file(full, ec)) {
            res.status = 404;  // an empty body: the router's error handler writes the API's no_route answer
            return;
        }
        set_security_headers(res);
        res.status = 200;
        res.set_content(read_file(full, 16u << 20), type);
    };
    router.add_page({"/", [serve](const http::Request&, http::Response& res) { serve("index.html", res); }});
    // Segments start with a letter, digit or '_' (so never '.' or '..'); the extension picks the type.
    router.add_page({R"(/((?:[A-Za-z0-9_][A-Za-z0-9_.-]*/)*[A-Za-z0-9_][A-Za-z0-9_.-]*\.[a-z]+))",
                     [serve](const http::Request& req, http::Response& res) { serve(req.matches[1], res); }});
}

}  // namespace llmt::server
