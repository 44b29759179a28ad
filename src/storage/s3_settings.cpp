#include "storage/s3_settings.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"

namespace llmt::storage {

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The key = value pairs of one [section] of an AWS INI file (empty when the file or section is absent).
std::map<std::string, std::string> ini_section(const std::filesystem::path& file, const std::string& section) {
    std::map<std::string, std::string> out;
    std::ifstream in(file);
    std::string line, current;
    while (std::getline(in, line)) {
        line = trim(line);
        if (line.empty() || line[0] == '#' || line[0] == ';') continue;
        if (line.front() == '[' && line.back() == ']') {
            current = trim(line.substr(1, line.size() - 2));
            continue;
        }
        const auto eq = line.find('=');
        if (current == section && eq != std::string::npos) out[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
    }
    return out;
}

std::filesystem::path aws_file(const char* var, const char* name) {
    if (!env(var).empty()) return env(var);
    return std::filesystem::path(env("HOME")) / ".aws" / name;
}

}  // namespace

S3Settings s3_settings_from_environment() {
    S3Settings s;
    const std::string profile = env("AWS_PROFILE").empty() ? "default" : env("AWS_PROFILE");
    s.credentials = {env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"), env("AWS_SESSION_TOKEN")};
    const auto cred_file = aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    if (s.credentials.access_key_id.empty() || s.credentials.secret_access_key.empty()) {
        auto sec = ini_section(cred_file, profile);
        s.credentials = {sec["aws_access_key_id"], sec["aws_secret_access_key"], sec["aws_session_token"]};
    }
    if (s.credentials.access_key_id.empty() || s.credentials.secret_access_key.empty())
        throw InputError(fmt::format(
            "object storage: no credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not both set, and "
            "profile '{}' of '{}' has no aws_access_key_id and aws_secret_access_key (hint: set them, or AWS_PROFILE)",
            profile, cred_file.string()));
    s.region = env("AWS_REGION");
    if (s.region.empty()) s.region = env("AWS_DEFAULT_REGION");
    if (s.region.empty()) {
        auto sec = ini_section(aws_file("AWS_CONFIG_FILE", "config"),
                               profile == "default" ? "default" : "profile " + profile);
        s.region = sec.count("region") ? sec["region"] : "us-east-1";
    }
    s.endpoint = env("AWS_ENDPOINT_URL");
    if (s.endpoint.empty()) {
        s.endpoint = fmt::format("https://s3.{}.amazonaws.com", s.region);
        s.path_style = false;
    } else {
        if (s.endpoint.rfind("http://", 0) != 0 && s.endpoint.rfind("https://", 0) != 0)
            throw InputError(fmt::format("AWS_ENDPOINT_URL: '{}' is not an http:// or https:// URL", s.endpoint));
        while (s.endpoint.back() == '/') s.endpoint.pop_back();
        s.path_style = true;
    }
    return s;
}

}  // namespace llmt::storage
