// Internal: a Redis node's "host:port" as servers name it (CLUSTER SLOTS entries joined by the
// router, MOVED / ASK targets, SENTINEL GET-MASTER-ADDR-BY-NAME, the routers' pool keys), split
// in one place. Redis writes an IPv6 node unbracketed ("::1:7000": the port follows the LAST
// colon); a bracketed literal ("[::1]:7000") is accepted too and its brackets dropped.
#pragma once

#include <string>
#include <string_view>

namespace lockstep::detail {

struct NodeAddress {
    std::string host;
    int port = 0;
};

// ProtocolError naming `address` when it has no host, no port, or a port that is not 1..65535.
NodeAddress split_address(std::string_view address);

}  // namespace lockstep::detail
