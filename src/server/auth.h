// Bearer-token auth: --tokens-file lines "<token> <name> <role>" with role viewer < submitter < runner < admin
// (runner: may also submit command jobs, which run arbitrary programs; docs/security.md).
// Without a file the server writes <data-dir>/tokens (mode 0600) holding one generated admin token.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace llmt::server {

enum class Role { kViewer = 0, kSubmitter = 1, kRunner = 2, kAdmin = 3 };
const char* role_name(Role r);

struct Principal {
    std::string name;
    Role role = Role::kViewer;
};

// Immutable after construction, so safe to share between threads.
class TokenTable {
public:
    // Parses a tokens file; '#' starts a comment. Throws InputError naming the file and line for a
    // malformed line, an unknown role, a token shorter than 16 characters or a duplicate token.
    static TokenTable load(const std::filesystem::path& path);
    // Creates `path` (0600) with one random admin token named "admin" unless it exists; then loads it.
    static TokenTable load_or_create(const std::filesystem::path& path, bool* created);

    // The principal for an "Authorization: Bearer <token>" header value; nullopt when unknown.
    // Compares in time independent of where tokens differ.
    std::optional<Principal> authenticate(const std::string& authorization_header) const;
    size_t size() const { return entries_.size(); }
    // The token a dashboard link carries (`serve` prints http://HOST:PORT/#token=...): the first admin's,
    // else the first submitter's, else the first token's.
    std::string link_token() const;

private:
    struct Entry {
        std::string token;
        Principal who;
    };
    std::vector<Entry> entries_;
};

}  // namespace llmt::server
