// libFuzzer target for --quotas-file (src/server/scheduler/admission.h), labels and submitter quotas. Contract
// under test: any bytes either load or throw llmt::Error (InputError naming the file); what loads has
// only "key=value" labels and limits that are unlimited (-1) or >= 0.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "server/scheduler/admission.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::filesystem::path file =
        std::filesystem::temp_directory_path() / ("llmt_quotas_fuzz_" + std::to_string(::getpid()) + ".json");
    std::ofstream(file, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                  static_cast<std::streamsize>(size));
    try {
        const llmt::server::Quotas q = llmt::server::load_quotas(file);
        for (const auto& [label, l] : q.labels)
            if (label.find('=') == std::string::npos || l.max_running < -1 || l.budget_usd < -1 ||
                l.max_disk_mb < -1) std::abort();
        for (const auto& [name, s] : q.submitters)
            if (name.empty() || s.max_queued < 0 || s.max_running < -1 || s.max_disk_mb < -1) std::abort();
    } catch (const llmt::Error&) {
    }
    return 0;
}
