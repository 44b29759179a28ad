// Seeding a job's run directory from another job's checkpoint; see job_resume.h.
#include "server/jobs/job_resume.h"

#include <fmt/format.h>

#include <charconv>
#include <string>

#include "core/error.h"
#include "core/fs.h"
#include "server/api_error.h"
#include "server/context.h"
#include "server/scheduler/executor.h"
#include "server/routes/job_views.h"
#include "server/jobs/store.h"

namespace llmt::server {

namespace fs = std::filesystem;

namespace {

// N of a "step_<N>" name, as the trainer writes them (train/checkpoint.h).
std::optional<int64_t> step_of(const std::string& name) {
    constexpr std::string_view kPrefix = "step_";
    if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
    int64_t n = 0;
    const char* first = name.data() + kPrefix.size();
    const char* last = name.data() + name.size();
    auto [p, ec] = std::from_chars(first, last, n);
    if (ec != std::errc() || p != last || n < 0) return std::nullopt;
    return n;
}

void link_or_copy(const fs::path& from, const fs::path& to) {
    std::error_code ec;
    fs::create_hard_link(from, to, ec);
    if (!ec) return;
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);  // another filesystem: copy
    if (ec) throw IoError(fmt::format("cannot copy {} to {}: {}", from.string(), to.string(), ec.message()));
}

}  // namespace

std::optional<fs::path> latest_checkpoint(const fs::path& run_dir) {
    const fs::path root = run_dir / "checkpoints";
    std::error_code ec;
    if (fs::is_regular_file(root / "latest", ec)) {
        std::string name = read_file(root / "latest", 256);
        while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
        if (step_of(name) && fs::is_directory(root / name, ec)) return root / name;
    }
    std::optional<std::pair<int64_t, fs::path>> best;
    for (const auto& e : fs::directory_iterator(root, ec)) {
        auto n = step_of(e.path().filename().string());
        if (n && e.is_directory(ec) && (!best || *n > best->first)) best.emplace(*n, e.path());
    }
    if (!best) return std::nullopt;
    return best->second;
}

void check_resume_from(ServerContext& ctx, const JobSpec& spec) {
    if (spec.resume_from <= 0) return;
    auto src = ctx.store.get(spec.resume_from);
    if (!src)
        throw ApiError(400, "invalid_field", fmt::format("resume_from: there is no job {}", spec.resume_from),
                       "resume_from");
    if (!is_final(src->state))
        throw ApiError(409, "not_final",
                       fmt::format("resume_from: job {} is {}; a job is resumed after it ended (cancel it first)",
                                   src->id, state_name(src->state)),
                       "resume_from");
    if (!ctx.executor.jobs_see_local_files())
        throw ApiError(422, "unsupported",
                       fmt::format("resume_from needs the run of job {} on this host; the {} executor keeps runs "
                                   "elsewhere (resume there with `train --resume auto` on the same output)",
                                   src->id, ctx.opts.executor),
                       "resume_from");
    if (!latest_checkpoint(job_run_dir(ctx, src->id)))
        throw ApiError(422, "no_checkpoint",
                       fmt::format("resume_from: job {} wrote no checkpoint to resume from (it {} before its first "
                                   "one; submit it again instead)",
                                   src->id, src->started_at > 0 ? "stopped" : "never ran, or stopped"),
                       "resume_from");
}

void seed_resumed_run(const fs::path& source_run, const fs::path& run_dir) {
    if (latest_checkpoint(run_dir)) return;  // a later attempt: it continues its own checkpoint
    auto ckpt = latest_checkpoint(source_run);
    if (!ckpt)
        throw InputError(fmt::format("the run to resume, {}, has no checkpoint any more", source_run.string()));
    const fs::path step_dir = run_dir / "checkpoints" / ckpt->filename();
    make_dirs(step_dir);
    for (const auto& e : fs::directory_iterator(*ckpt)) {
        if (!e.is_regular_file()) continue;
        fs::remove(step_dir / e.path().filename());
        link_or_copy(e.path(), step_dir / e.path().filename());
    }
    for (const char* f : {"config.yaml", "metrics.jsonl"}) {
        std::error_code ec;
        if (fs::is_regular_file(source_run / f, ec))
            write_file_atomic(run_dir / f, read_file(source_run / f));
    }
    write_file_atomic(run_dir / "checkpoints" / "latest", ckpt->filename().string() + "\n");
}

}  // namespace llmt::server
