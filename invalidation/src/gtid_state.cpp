#include "lockstep/invalidation/gtid_state.h"

#include <charconv>
#include <string_view>

#include "lockstep/core/error.h"

namespace lockstep {

namespace {

template <class N>
N number(std::string_view part, const std::string& text) {
    N value{};
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (ec != std::errc{} || end != part.data() + part.size() || part.empty()) {
        throw ConfigError("GTID position", "not domain-server-sequence[,...]: '" + text + "'");
    }
    return value;
}

}  // namespace

GtidState GtidState::parse(const std::string& text) {
    GtidState state;
    std::string_view rest = text;
    while (!rest.empty()) {
        auto comma = rest.find(',');
        std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        while (!item.empty() && (item.front() == ' ' || item.front() == '\n')) item.remove_prefix(1);
        if (item.empty()) continue;
        auto d1 = item.find('-'), d2 = item.find('-', d1 == std::string_view::npos ? d1 : d1 + 1);
        if (d1 == std::string_view::npos || d2 == std::string_view::npos) {
            throw ConfigError("GTID position", "not domain-server-sequence[,...]: '" + text + "'");
        }
        binlog::Gtid g;
        g.domain = number<std::uint32_t>(item.substr(0, d1), text);
        g.server_id = number<std::uint32_t>(item.substr(d1 + 1, d2 - d1 - 1), text);
        g.sequence = number<std::uint64_t>(item.substr(d2 + 1), text);
        state.update(g);
    }
    return state;
}

bool GtidState::covers(const GtidState& other) const {
    for (const auto& [domain, gtid] : other.last_) {
        auto it = last_.find(domain);
        if (it == last_.end() || it->second.sequence < gtid.sequence) return false;
    }
    return true;
}

std::string GtidState::to_string() const {
    std::string out;
    for (const auto& [domain, gtid] : last_) {
        if (!out.empty()) out += ",";
        out += gtid.to_string();
    }
    return out;
}

}  // namespace lockstep
