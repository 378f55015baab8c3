// RedisOptions::address_map from the URL: each announced address and the one a client uses
// instead (NAT, port forwarding, a proxy in front of a Cluster's or a Sentinel's nodes).
#include <gtest/gtest.h>

#include <string>

#include "lockstep/core/error.h"
#include "lockstep/core/redis_options.h"
#include "lockstep/core/uri.h"

namespace lockstep {
namespace {

TEST(AddressMap, AClusterUrlMapsEachAnnouncedNodeAndLeavesOthersAlone) {
    const RedisOptions o = parse_redis_url(
        "redis+cluster://127.0.0.1:7000?address_map=10.0.0.1:6379=127.0.0.1:16379,10.0.0.2:6379=127.0.0.1:16380");
    ASSERT_EQ(o.address_map.size(), 2u);
    EXPECT_EQ(mapped_address(o, "10.0.0.1", 6379), (RedisEndpoint{"127.0.0.1", 16379}));
    EXPECT_EQ(mapped_address(o, "10.0.0.2", 6379), (RedisEndpoint{"127.0.0.1", 16380}));
    EXPECT_EQ(mapped_address(o, "10.0.0.1", 6380), (RedisEndpoint{"10.0.0.1", 6380}));
    EXPECT_EQ(mapped_address(o, "10.0.0.3", 6379), (RedisEndpoint{"10.0.0.3", 6379}));
}

TEST(AddressMap, ToUrlKeepsTheMap) {
    const RedisOptions o =
        parse_redis_url("redis+cluster://127.0.0.1:7000?address_map=10.0.0.1:6379=127.0.0.1:16379");
    EXPECT_EQ(parse_redis_url(to_url(o)).address_map, o.address_map);
}

TEST(AddressMap, ASentinelUrlCarriesItToo) {
    const RedisOptions o =
        parse_redis_url("redis+sentinel://127.0.0.1:26379/mymaster?address_map=redis-master:6379=127.0.0.1:6400");
    EXPECT_EQ(mapped_address(o, "redis-master", 6379), (RedisEndpoint{"127.0.0.1", 6400}));
}

TEST(AddressMap, MalformedMapsAreConfigErrorsNamingTheParameter) {
    for (const char* bad : {"10.0.0.1:6379", "10.0.0.1=127.0.0.1:1", "10.0.0.1:6379=127.0.0.1",
                            "10.0.0.1:0=127.0.0.1:1", "10.0.0.1:6379=127.0.0.1:70000", ":6379=127.0.0.1:1",
                            "10.0.0.1:6379=127.0.0.1:1,10.0.0.1:6379=127.0.0.1:2", "a:1=b:2,"}) {
        try {
            parse_redis_url(std::string("redis+cluster://127.0.0.1:7000?address_map=") + bad);
            ADD_FAILURE() << "accepted address_map=" << bad;
        } catch (const ConfigError& e) {
            EXPECT_EQ(e.part(), "query parameter 'address_map'") << bad;
        }
    }
}

}  // namespace
}  // namespace lockstep
