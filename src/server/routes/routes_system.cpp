// Service routes: health, Prometheus metrics, the OpenAPI document.

#include <fmt/format.h>

#include "core/version.h"
#include "server/context.h"
#include "server/scheduler/executor.h"
#include "server/routes/prom.h"
#include "server/routes/router.h"
#include "server/jobs/store.h"

namespace llmt::server {

void register_system_routes(Router& router, ServerContext& ctx) {
    router.add({"GET", "/healthz", std::nullopt, "Liveness: the server answers and its database opens",
                nlohmann::json::object(), [&ctx](Call& c) {
                    c.reply(200, {{"status", "ok"},
                                  {"version", build_info().version},
                                  {"executor", ctx.executor.name()},
                                  {"schema_version", ctx.store.schema_version()}});
                }});

    router.add({"GET",
                "/metrics",
                std::nullopt,
                "Prometheus metrics (text format 0.0.4)",
                {{"responses",
                  {{"200", {{"description", "metrics"}, {"content", {{"text/plain", nlohmann::json::object()}}}}}}}},
                [&ctx](Call& c) {
                    auto counts = ctx.store.count_by_state();
                    std::string o = "# HELP llmtrain_jobs Jobs by state.\n# TYPE llmtrain_jobs gauge\n";
                    for (const auto& [state, n] : counts)
                        o += fmt::format("llmtrain_jobs{{state=\"{}\"}} {}\n", state, n);
                    o += fmt::format("# HELP llmtrain_queue_depth Jobs waiting for admission (queued + retrying).\n"
                                     "# TYPE llmtrain_queue_depth gauge\nllmtrain_queue_depth {}\n",
                                     counts["queued"] + counts["retrying"]);
                    o += fmt::format("# HELP llmtrain_capacity Slots the scheduler admits against.\n"
                                     "# TYPE llmtrain_capacity gauge\nllmtrain_capacity{{resource=\"cpus\"}} {}\n"
                                     "llmtrain_capacity{{resource=\"gpus\"}} {}\n",
                                     ctx.opts.capacity.cpus, ctx.opts.capacity.gpus);
                    o += ctx.metrics.render();
                    c.res.status = 200;
                    c.res.set_content(o, "text/plain; version=0.0.4");
                }});

    router.add({"GET", "/v1/openapi.json", Role::kViewer, "This API's OpenAPI 3 document", nlohmann::json::object(),
                [&ctx](Call& c) { c.reply(200, ctx.router->openapi()); }});
}

}  // namespace llmt::server
