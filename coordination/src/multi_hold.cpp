// MultiHold: a MultiLock's names held as one movable value (multi_hold.h).
#include "lockstep/coordination/multi_hold.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <utility>

#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"

namespace lockstep {

namespace {

// Forwards a part's stop request to the MultiHold's own stop source.
struct RequestStop {
    std::stop_source target;
    void operator()() noexcept { target.request_stop(); }
};

[[noreturn]] void throw_empty(const char* what) {
    throw NotOwnerError(std::string("MultiHold::") + what + " on an empty hold (moved from, released, or not acquired)");
}

const std::vector<std::string> no_names;

}  // namespace

struct MultiHold::State {
    std::vector<std::string> names;
    std::vector<Hold> holds;  // in names order
    std::stop_source stop;
    // One per part, registered on the part's stop token; destroyed before the parts are released,
    // so a release never requests the MultiHold's stop token.
    std::vector<std::optional<std::stop_callback<RequestStop>>> forwards;
};

MultiHold::MultiHold() noexcept = default;
MultiHold::MultiHold(MultiHold&& other) noexcept = default;

MultiHold::MultiHold(std::vector<std::string> names, std::vector<Hold> holds) : state_(std::make_unique<State>()) {
    state_->names = std::move(names);
    state_->holds = std::move(holds);
    state_->forwards = std::vector<std::optional<std::stop_callback<RequestStop>>>(state_->holds.size());
    // A part already lost runs its callback here, at once: the token is requested before the
    // caller sees the MultiHold.
    for (std::size_t i = 0; i < state_->holds.size(); ++i) {
        state_->forwards[i].emplace(state_->holds[i].stop_token(), RequestStop{state_->stop});
    }
}

MultiHold& MultiHold::operator=(MultiHold&& other) noexcept {
    if (this != &other) {
        MultiHold old(std::move(*this));  // released (reported, never thrown) as `old` goes
        state_ = std::move(other.state_);
    }
    return *this;
}

MultiHold::~MultiHold() {
    if (!state_) return;
    try {
        release();
    } catch (const std::exception& e) {
        logger()->warn("multi-name hold released by its destructor: {}", e.what());
    } catch (...) {
        logger()->warn("multi-name hold released by its destructor: unknown error");
    }
}

const std::vector<std::string>& MultiHold::names() const noexcept { return state_ ? state_->names : no_names; }

FenceToken MultiHold::fence_token(const std::string& name) const {
    if (!state_) throw_empty("fence_token()");
    const auto& names = state_->names;
    const auto it = std::lower_bound(names.begin(), names.end(), name);
    if (it == names.end() || *it != name) throw ConfigError("MultiHold name", "'" + name + "' is not one of its names");
    return state_->holds[static_cast<std::size_t>(it - names.begin())].fence_token();
}

bool MultiHold::lost() const {
    return state_ && std::any_of(state_->holds.begin(), state_->holds.end(), [](const Hold& h) { return h.lost(); });
}

std::stop_token MultiHold::stop_token() const noexcept { return state_ ? state_->stop.get_token() : std::stop_token(); }

void MultiHold::release() {
    if (!state_) throw_empty("release()");
    // Empty before any part is released: a release that throws has forgotten them all the same.
    std::unique_ptr<State> state = std::move(state_);
    state->forwards.clear();
    for (std::size_t i = state->holds.size(); i-- > 0;) {
        try {
            state->holds[i].release();
        } catch (const std::exception& e) {
            logger()->warn("MultiHold: releasing '{}' failed: {}", state->names[i], e.what());
        }
    }
}

void MultiHold::release_checked() {
    if (!state_) throw_empty("release_checked()");
    std::unique_ptr<State> state = std::move(state_);
    state->forwards.clear();
    std::string lost_names;
    std::exception_ptr other;
    for (std::size_t i = state->holds.size(); i-- > 0;) {
        try {
            state->holds[i].release_checked();
        } catch (const LockLostError& e) {
            lost_names += (lost_names.empty() ? "" : "; ") + state->names[i] + " (" + e.what() + ")";
        } catch (...) {
            if (!other) other = std::current_exception();
        }
    }
    if (!lost_names.empty()) throw LockLostError("MultiHold: lost before release: " + lost_names);
    if (other) std::rethrow_exception(other);
}

}  // namespace lockstep
