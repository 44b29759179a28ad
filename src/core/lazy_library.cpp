// LazyLibrary (lazy_library.h): dlopen on first use, messages that say what was tried.
#include "core/lazy_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>
#include <utility>

#include "core/error.h"

namespace llmt {
namespace {

std::mutex& open_mutex() {
    static std::mutex mu;
    return mu;
}

}  // namespace

LazyLibrary::LazyLibrary(std::vector<std::string> candidates, std::string what, std::string hint)
    : candidates_(std::move(candidates)), what_(std::move(what)), hint_(std::move(hint)) {}

void* LazyLibrary::open() const {
    std::lock_guard<std::mutex> lock(open_mutex());
    if (tried_) return handle_;
    tried_ = true;
    std::string tried;
    for (const std::string& c : candidates_) {
        // RTLD_LOCAL: its symbols stay out of the global scope, so they cannot pre-empt our shims.
        handle_ = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (handle_) return handle_;
        const char* e = dlerror();
        tried += fmt::format("\n  {}: {}", c, e ? e : "not found");
    }
    error_ = fmt::format("cannot load {} (needed by this code path; it is loaded on first use):{}\nhint: {}", what_,
                         tried, hint_);
    return nullptr;
}

bool LazyLibrary::available() const { return open() != nullptr; }

void* LazyLibrary::symbol(const char* name) const {
    void* h = open();
    if (!h) throw DeviceError(error_);
    void* s = dlsym(h, name);
    if (!s) throw DeviceError(fmt::format("{} has no symbol {} (a version older than the headers llmtrain was built "
                                          "with?)\nhint: {}", what_, name, hint_));
    return s;
}

}  // namespace llmt
