#include "key_scan.h"

#include <sstream>

#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_cluster_slot.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace {

void scan_on(RedisConnection& conn, const std::string& pattern,
             const std::function<void(const std::vector<std::string>&)>& page) {
    std::string cursor = "0";
    do {
        RedisReply reply = conn.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
        reply.throw_if_error();
        cursor = reply.elements().at(0).str();
        std::vector<std::string> keys;
        for (const auto& k : reply.elements().at(1).elements()) keys.push_back(k.str());
        if (!keys.empty()) page(keys);
    } while (cursor != "0");
}

// The first slot each master serves, from CLUSTER NODES:
//   <id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot-range>...
std::vector<int> one_slot_per_master(const std::string& nodes) {
    std::vector<int> slots;
    std::istringstream lines(nodes);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream f(line);
        std::vector<std::string> w;
        for (std::string x; f >> x;) w.push_back(x);
        if (w.size() < 9 || w[2].find("master") == std::string::npos || w[2].find("fail") != std::string::npos) continue;
        for (std::size_t i = 8; i < w.size(); ++i) {
            if (w[i].empty() || w[i][0] == '[') continue;  // a slot being migrated
            slots.push_back(std::stoi(w[i].substr(0, w[i].find('-'))));
            break;
        }
    }
    return slots;
}

// A key whose slot is `slot` (a hash tag found by trying; ~16k CRC16s at most per master).
std::string key_in_slot(int slot) {
    for (int n = 0;; ++n) {
        std::string key = "{" + std::to_string(n) + "}";
        if (redis_cluster_slot(key) == slot) return key;
    }
}

}  // namespace

void scan_every_master(RedisClient& redis, const std::string& pattern,
                       const std::function<void(const std::vector<std::string>&)>& page) {
    if (redis.options().topology != RedisTopology::Cluster) {
        auto conn = redis.connection();
        scan_on(*conn, pattern, page);
        return;
    }
    RedisReply nodes = redis.command({"CLUSTER", "NODES"});
    nodes.throw_if_error();
    std::vector<int> slots = one_slot_per_master(nodes.str());
    if (slots.empty()) throw ProtocolError("redis: CLUSTER NODES lists no master serving a slot");
    for (int slot : slots) {
        auto conn = redis.connection_for_key(key_in_slot(slot));
        scan_on(*conn, pattern, page);
    }
}

}  // namespace lockstep
