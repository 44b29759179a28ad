// Tokens file parsing, generation from the kernel's CSPRNG (getrandom), constant-time comparison.
#include "server/auth.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fs.h"

namespace llmt::server {

const char* role_name(Role r) {
    switch (r) {
        case Role::kViewer: return "viewer";
        case Role::kSubmitter: return "submitter";
        case Role::kRunner: return "runner";
        case Role::kAdmin: return "admin";
    }
    return "?";
}

namespace {

bool equal_constant_time(const std::string& a, const std::string& b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
    return diff == 0 && !b.empty();
}

std::string random_token() {
    unsigned char buf[32];
    size_t got = 0;
    while (got < sizeof buf) {
        ssize_t n = ::getrandom(buf + got, sizeof buf - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw IoError(std::string("getrandom: ") + std::strerror(errno));
        }
        got += static_cast<size_t>(n);
    }
    std::string s = "llmt_";
    for (unsigned char c : buf) s += fmt::format("{:02x}", c);
    return s;
}

}  // namespace

TokenTable TokenTable::load(const std::filesystem::path& path) {
    TokenTable t;
    std::istringstream in(read_file(path, 1 << 20));
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
        ++lineno;
        if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
        std::istringstream ls(line);
        std::string token, name, role, extra;
        if (!(ls >> token)) continue;
        auto where = fmt::format("{}:{}", path.string(), lineno);
        if (!(ls >> name >> role) || (ls >> extra))
            throw InputError(where + ": expected '<token> <name> <role>'");
        if (token.size() < 16) throw InputError(where + ": token is shorter than 16 characters");
        Entry e{token, {name, Role::kViewer}};
        if (role == "viewer")
            e.who.role = Role::kViewer;
        else if (role == "submitter")
            e.who.role = Role::kSubmitter;
        else if (role == "runner")
            e.who.role = Role::kRunner;
        else if (role == "admin")
            e.who.role = Role::kAdmin;
        else
            throw InputError(where + ": unknown role '" + role + "' (expected viewer, submitter, runner or admin)");
        for (const auto& o : t.entries_)
            if (o.token == token) throw InputError(where + ": duplicate token (also for '" + o.who.name + "')");
        t.entries_.push_back(std::move(e));
    }
    if (t.entries_.empty()) throw InputError(path.string() + ": no tokens");
    return t;
}

TokenTable TokenTable::load_or_create(const std::filesystem::path& path, bool* created) {
    *created = false;
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
        std::string body =
            "# llmtrain serve: generated admin token. Format: <token> <name> <role>, one per line, token first\n"
            "# (the token alone: grep -v '^#' FILE | cut -d' ' -f1)\n" +
            random_token() + " admin admin\n";
        bool ok = ::write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size()) && ::fsync(fd) == 0;
        ::close(fd);
        if (!ok) throw IoError("cannot write " + path.string() + ": " + std::strerror(errno));
        *created = true;
    } else if (errno != EEXIST) {
        throw IoError("cannot create " + path.string() + ": " + std::strerror(errno));
    }
    return load(path);
}

std::string TokenTable::link_token() const {
    for (Role r : {Role::kAdmin, Role::kSubmitter, Role::kViewer})
        for (const auto& e : entries_)
            if (e.who.role == r) return e.token;
    return entries_.empty() ? std::string() : entries_.front().token;
}

std::optional<Principal> TokenTable::authenticate(const std::string& header) const {
    // The scheme is case-insensitive (RFC 9110 11.1: "bearer" is "Bearer"), then one or more spaces.
    static const std::string kScheme = "bearer";
    if (header.size() <= kScheme.size() || header[kScheme.size()] != ' ') return std::nullopt;
    for (size_t i = 0; i < kScheme.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return std::nullopt;
    const size_t start = header.find_first_not_of(' ', kScheme.size());
    std::string token = start == std::string::npos ? std::string() : header.substr(start);
    if (token.empty()) return std::nullopt;
    std::optional<Principal> found;
    for (const auto& e : entries_)  // no early exit: every token is compared
        if (equal_constant_time(token, e.token)) found = e.who;
    return found;
}

}  // namespace llmt::server
