#include "node_address.h"

#include "lockstep/core/error.h"

namespace lockstep::detail {

NodeAddress split_address(std::string_view address) {
    auto bad = [&](const char* why) {
        return ProtocolError("Redis named a node '" + std::string(address) + "' that is not host:port (" + why + ")");
    };
    std::string_view host, port;
    if (!address.empty() && address.front() == '[') {
        const auto close = address.find("]:");
        if (close == std::string_view::npos) throw bad("an IPv6 literal needs ']:port'");
        host = address.substr(1, close - 1);
        port = address.substr(close + 2);
    } else {
        const auto colon = address.rfind(':');
        if (colon == std::string_view::npos) throw bad("no port");
        host = address.substr(0, colon);
        port = address.substr(colon + 1);
    }
    if (host.empty()) throw bad("no host");
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) {
        throw bad("the port is not a number");
    }
    const int number = std::stoi(std::string(port));
    if (number < 1 || number > 65535) throw bad("the port is not 1..65535");
    return NodeAddress{std::string(host), number};
}

}  // namespace lockstep::detail
