// cache/src/node_address.h: the one split of a Redis node's "host:port" (the cluster router, the
// sentinel router and the cluster subscriber's locator use it). An internal header, included by
// path: the function is not public API. No server needed.
#include <gtest/gtest.h>

#include <string>

#include "../../cache/src/node_address.h"
#include "lockstep/core/error.h"

namespace lockstep {
namespace {

using detail::split_address;

TEST(NodeAddress, SplitsHostAndPortAtTheLastColon) {
    const auto v4 = split_address("127.0.0.1:7000");
    EXPECT_EQ(v4.host, "127.0.0.1");
    EXPECT_EQ(v4.port, 7000);
    const auto name = split_address("redis-a.example:6379");
    EXPECT_EQ(name.host, "redis-a.example");
    EXPECT_EQ(name.port, 6379);
    // Redis writes an IPv6 node unbracketed (MOVED, CLUSTER SLOTS joined): the port is last.
    const auto bare = split_address("::1:7000");
    EXPECT_EQ(bare.host, "::1");
    EXPECT_EQ(bare.port, 7000);
}

TEST(NodeAddress, ABracketedIPv6LiteralLosesItsBracketsNotItsColons) {
    const auto v6 = split_address("[::1]:7000");
    EXPECT_EQ(v6.host, "::1");
    EXPECT_EQ(v6.port, 7000);
    const auto full = split_address("[fe80::1:2]:65535");
    EXPECT_EQ(full.host, "fe80::1:2");
    EXPECT_EQ(full.port, 65535);
}

TEST(NodeAddress, AMalformedAddressIsAProtocolErrorNamingIt) {
    for (const std::string bad : {"127.0.0.1", "127.0.0.1:", ":7000", "host:70000", "host:0", "host:12a", "host:-1",
                                  "[::1]7000", "[::1]:", "[]:7000", "", "host:123456789012"}) {
        try {
            split_address(bad);
            ADD_FAILURE() << "'" << bad << "' was accepted";
        } catch (const ProtocolError& e) {
            EXPECT_NE(std::string(e.what()).find("'" + bad + "'"), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace lockstep
