#include "lockstep/servers/proxied_lock_service.h"

#include "lockstep/locks/lock_service.h"
#include "lockstep/servers/proxied_url.h"

namespace lockstep {

namespace {

std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + "ms"; }

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

void ProxiedLockService::blackhole() {
    for (auto& p : proxies) p->blackhole();
}
void ProxiedLockService::pass() {
    for (auto& p : proxies) p->pass();
}
void ProxiedLockService::reset() {
    for (auto& p : proxies) p->reset();
}
void ProxiedLockService::refuse() {
    for (auto& p : proxies) p->refuse();
}
void ProxiedLockService::latency(std::chrono::milliseconds fixed, FaultDirection direction) {
    for (auto& p : proxies) p->latency(fixed, std::chrono::milliseconds(0), direction);
}

ProxiedLockService open_proxied_lock_service(std::string url, LockServiceOptions options, ProxiedTimeouts timeouts) {
    ProxiedLockService s;
    for (const UrlEndpoint& e : url_endpoints(url)) {
        s.proxies.push_back(std::make_unique<FaultProxy>(e.host, e.port));
        url = proxied_url(url, *s.proxies.back());
    }
    if (starts_with(url, "redis://") || starts_with(url, "redis-fair://") || starts_with(url, "redlock://")) {
        url = with_query_param(url, "socket_timeout", ms_text(timeouts.redis_timeout));
        url = with_query_param(url, "connect_timeout", ms_text(timeouts.redis_timeout));
    } else if (starts_with(url, "mysql://")) {
        url = with_query_param(url, "read_timeout", ms_text(timeouts.mysql_timeout));
        url = with_query_param(url, "write_timeout", ms_text(timeouts.mysql_timeout));
    }
    s.service = open_lock_service(url, std::move(options));
    return s;
}

}  // namespace lockstep
