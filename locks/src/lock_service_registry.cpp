// open_lock_service: the scheme of a URL chooses the backend. The registry is a plain list
// filled once, on first use, by register_builtin_lock_backends(), which CMake generates from the
// backends built (one call per locks/<backend>/src/registration.cpp), so no backend depends on static-initialisation order or on the linker keeping
// an otherwise unreferenced object file.
#include <algorithm>
#include <mutex>
#include <utility>

#include "lockstep/core/error.h"
#include "lockstep/core/mutex.h"
#include "lockstep/locks/lock_service.h"

namespace lockstep {

void register_builtin_lock_backends();  // generated: cmake/LockstepLayers.cmake

namespace {

struct Registry {
    Mutex mu;
    std::vector<std::pair<std::string, LockServiceOpener>> openers GUARDED_BY(mu);
};

// Storage only; register_lock_backend writes here (also while the built-ins register).
Registry& raw_registry() {
    static Registry& r = *new Registry;  // never destroyed: usable from other static destructors
    return r;
}

void ensure_builtins() {
    static std::once_flag once;
    std::call_once(once, [] { register_builtin_lock_backends(); });
}

}  // namespace

void register_lock_backend(std::string scheme, LockServiceOpener opener) {
    auto& r = raw_registry();
    MutexLock g(r.mu);
    auto it = std::find_if(r.openers.begin(), r.openers.end(), [&](const auto& p) { return p.first == scheme; });
    if (it != r.openers.end()) {
        it->second = std::move(opener);
    } else {
        r.openers.emplace_back(std::move(scheme), std::move(opener));
    }
}

std::vector<std::string> lock_service_schemes() {
    ensure_builtins();
    auto& r = raw_registry();
    MutexLock g(r.mu);
    std::vector<std::string> out;
    for (const auto& p : r.openers) out.push_back(p.first);
    return out;
}

std::unique_ptr<LockService> open_lock_service(std::string_view url, LockServiceOptions options) {
    ensure_builtins();
    const auto colon = url.find(':');
    const std::string scheme(url.substr(0, colon == std::string_view::npos ? url.size() : colon));
    LockServiceOpener opener;
    {
        auto& r = raw_registry();
        MutexLock g(r.mu);
        for (const auto& p : r.openers) {
            if (p.first == scheme) opener = p.second;
        }
    }
    if (!opener) {
        std::string known;
        for (const auto& s : lock_service_schemes()) known += (known.empty() ? "" : ", ") + s;
        throw ConfigError("lock service URL", "unknown scheme '" + scheme + "' (known: " + known + ")");
    }
    return opener(url, std::move(options));
}

}  // namespace lockstep
