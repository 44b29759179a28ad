// Checks. LLMT_CHECK: a condition user input can reach (config, files, requests, flags) -> InputError,
// exit 2. LLMT_INTERNAL_CHECK: an invariant the engine itself must meet (shapes inside the engine, ops.h
// preconditions, arena and writer state) -> InternalError, exit 1, with the unwinding that lets the
// trainer and the server clean up. LLMT_ASSERT: the same for places that cannot throw (OpenMP regions,
// destructors, hot loops): prints file:line and aborts.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "core/error.h"

// Throws ErrorType(message) when cond is false. The message is formatted with fmt.
#define LLMT_CHECK_AS(ErrorType, cond, ...)                      \
    do {                                                         \
        if (!(cond)) throw ErrorType(fmt::format(__VA_ARGS__));  \
    } while (0)
#define LLMT_CHECK(cond, ...) LLMT_CHECK_AS(::llmt::InputError, cond, __VA_ARGS__)

// Throws InternalError(message), whose what() starts "internal error: ", when cond is false.
#define LLMT_INTERNAL_CHECK(cond, ...) LLMT_CHECK_AS(::llmt::InternalError, cond, __VA_ARGS__)

// Internal invariant: prints file:line and aborts. Never for conditions user input can reach.
#define LLMT_ASSERT(cond)                                                                   \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            std::fprintf(stderr, "llmtrain: internal error: %s:%d: assertion `%s` failed\n", \
                         __FILE__, __LINE__, #cond);                                        \
            std::abort();                                                                   \
        }                                                                                   \
    } while (0)

#ifdef NDEBUG
#define LLMT_DCHECK(cond) \
    do {                  \
    } while (0)
#else
#define LLMT_DCHECK(cond) LLMT_ASSERT(cond)
#endif
