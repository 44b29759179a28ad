// The config-loader fuzz body, shared by the libFuzzer target and the short in-gtest run.
// Contract under test: any bytes either load or throw ConfigValidationError; nothing else escapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config/emit.h"
#include "config/loader.h"

namespace llmt::fuzz {

inline void fuzz_config_one(const uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        auto cfg = config::load_config_string(text, "fuzz.yaml");
        // Whatever loads must print and load again to the same values.
        auto again = config::load_config_string(config::to_yaml(cfg.resolved), "again.yaml");
        if (again.resolved != cfg.resolved) std::abort();
    } catch (const config::ConfigValidationError&) {
    }
}

}  // namespace llmt::fuzz
