// RACES L11: the give-back of a grant whose reply arrived after its validity (late_grant.h).
#include "late_grant.h"

#include <exception>

#include "lock_log.h"
#include "lockstep/core/logging.h"

namespace lockstep {

void give_back_late_grant(const std::string& name, const std::string& tag,
                          const std::function<void()>& give_back) noexcept {
    try {
        give_back();
    } catch (const std::exception& e) {
        logger()->warn("lock '{}': giving back a grant that arrived after its validity failed ({}); its lease ends it",
                       name, e.what());
    }
    locks_detail::lock_log(spdlog::level::debug, name, tag, "a grant arrived after its validity: given back");
}

}  // namespace lockstep
