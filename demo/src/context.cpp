#include "context.h"

#include <cstdio>
#include <string>

#include "workers.h"

namespace lockstep::demo {

namespace {
const auto g_start = std::chrono::steady_clock::now();
}

double seconds_since_start() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count();
}

DemoContext::DemoContext(const DemoOptions& options, Services& services, Report& report, std::int64_t id_base)
    : options_(options), services_(services), report_(report), id_base_(id_base), next_id_(id_base) {}

DemoContext::~DemoContext() = default;

WorkerPool& DemoContext::worker_pool() {
    if (!pool_) {
        pool_ = std::make_unique<WorkerPool>(services_.endpoints(), services_.prefix(), options_.threads + 4);
    }
    return *pool_;
}

void DemoContext::progress(std::string_view text) const {
    char stamp[32];
    std::snprintf(stamp, sizeof stamp, "[%.1fs] ", seconds_since_start());
    std::string line = stamp;
    line.append(text);
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
}

void DemoContext::add(Result r) { report_.add(std::move(r)); }

std::int64_t DemoContext::new_ids(int n) { return next_id_.fetch_add(n); }

std::string DemoContext::unique(std::string_view what) {
    return std::string(what) + "-" + std::to_string(next_name_.fetch_add(1));
}

}  // namespace lockstep::demo
