// Hold: the movable value over a backend's HeldLock (hold.h).
#include "lockstep/locks/hold.h"

#include <exception>
#include <utility>

#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"

namespace lockstep {

namespace {

[[noreturn]] void throw_empty(const char* what) {
    throw NotOwnerError(std::string("Hold::") + what + " on an empty hold (moved from, released, or not acquired)");
}

}  // namespace

Hold& Hold::operator=(Hold&& other) noexcept {
    if (this != &other) {
        Hold old(std::move(*this));  // released (reported, never thrown) as `old` goes
        held_ = std::move(other.held_);
    }
    return *this;
}

Hold::~Hold() {
    if (!held_) return;
    try {
        release_as(UnlockMode::Report);
    } catch (const std::exception& e) {
        // Report mode throws only what is no loss (the service was destroyed first): logged.
        logger()->warn("lock hold released by its destructor: {}", e.what());
    } catch (...) {
        logger()->warn("lock hold released by its destructor: unknown error");
    }
}

FenceToken Hold::fence_token() const {
    if (!held_) throw_empty("fence_token()");
    return held_->fence_token();
}

bool Hold::lost() const { return held_ && held_->lost(); }

std::stop_token Hold::stop_token() const noexcept { return held_ ? held_->stop_token() : std::stop_token(); }

std::optional<std::chrono::system_clock::time_point> Hold::server_time_at_grant() const {
    if (!held_) throw_empty("server_time_at_grant()");
    return held_->server_time_at_grant();
}

const std::string& Hold::name() const {
    if (!held_) throw_empty("name()");
    return held_->name();
}

void Hold::release() { release_as(UnlockMode::Report); }

void Hold::release_checked() { release_as(UnlockMode::Throw); }

void Hold::release_as(UnlockMode mode) {
    if (!held_) throw_empty(mode == UnlockMode::Throw ? "release_checked()" : "release()");
    // Empty before the backend runs: a release that throws has forgotten the hold all the same.
    std::unique_ptr<detail::HeldLock> held = std::move(held_);
    held->release(mode);
}

}  // namespace lockstep
