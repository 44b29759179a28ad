// A vendor shared library opened on first use (dlopen) instead of at start-up, so commands that never
// reach its code path do not map it, run its constructors or pay its relocations: `llmtrain version`,
// the launcher, `serve`, `k8s` and CPU training load no cuBLASLt, NCCL, oneDNN or OpenBLAS
// (docs/architecture.md, "Start-up"). The binary does not link these libraries; each one's functions are
// defined by a shim (LLMT_LAZY_FUNCTION) with the vendor header's exact prototype, forwarding to the
// symbol resolved at the first call, so call sites stay plain vendor calls.
// Thread safety: all members are safe to call from any thread.
#pragma once

#include <string>
#include <vector>

namespace llmt {

class LazyLibrary {
public:
    // candidates: file names tried in order with dlopen (a soname first, then build-time paths).
    // what: the library's name in messages; hint: how to install it.
    LazyLibrary(std::vector<std::string> candidates, std::string what, std::string hint);
    LazyLibrary(const LazyLibrary&) = delete;
    LazyLibrary& operator=(const LazyLibrary&) = delete;

    // Opens the library if no call has yet; true when it is loaded. Never throws.
    bool available() const;
    // The symbol's address. Throws DeviceError naming the library, the candidates tried and the loader's
    // message (with the hint) when the library cannot be opened, or naming the symbol when it is missing.
    void* symbol(const char* name) const;

private:
    void* open() const;  // the handle or nullptr; tried once

    std::vector<std::string> candidates_;
    std::string what_;
    std::string hint_;
    mutable std::string error_;  // written once, under the open's once-flag
    mutable void* handle_ = nullptr;
    mutable bool tried_ = false;
};

// The value of a macro as a string literal, for sonames built from a header's version macros:
// "libnccl.so." LLMT_LAZY_STR(NCCL_MAJOR).
#define LLMT_LAZY_STR_(x) #x
#define LLMT_LAZY_STR(x) LLMT_LAZY_STR_(x)

// Defines the C function `name` (declared by the vendor header with parameter list `params`) to call
// the same symbol of `lib` (an expression yielding a LazyLibrary&) with `args`. The symbol is resolved
// once, at the first call; a failure throws DeviceError from that call (never from a static initialiser).
#define LLMT_LAZY_FUNCTION(lib, ret, name, params, args)                                                   \
    extern "C" ret name params {                                                                           \
        static const auto fn = reinterpret_cast<decltype(&::name)>((lib).symbol(#name));                   \
        return fn args;                                                                                    \
    }

}  // namespace llmt
