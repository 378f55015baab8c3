// Helpers shared by the topology tests (tests/topologies/): talk to one node of a private
// cluster or replication set directly, bypassing any routing.
#pragma once

#include <string>
#include <vector>

#include "lockstep/cache/redis_connection.h"

namespace lockstep::test {

// One command on the node at 127.0.0.1:`port`, on a fresh connection (no cluster routing: the
// tests ask a particular node about itself, e.g. CLUSTER INFO, CLUSTER MYID, SETSLOT).
inline RedisReply on_node(int port, const std::vector<std::string>& args) {
    RedisOptions o;
    o.port = port;
    RedisConnection conn(o);
    return conn.command(args);
}

}  // namespace lockstep::test
