// Every key matching a SCAN pattern on every master, for the follower's full flushes (a lost
// position, a statement-format change, DDL). SCAN walks only the node it is sent to, and an
// entity's keys are spread over every slot (their hash tag is `{entity:id}`), so on a Redis Cluster
// each master is scanned: the masters and their slot ranges come from CLUSTER NODES, and a
// connection to each is borrowed through connection_for_key() of a key in one of its slots (the
// client's own pools, credentials and timeouts). Standalone and Sentinel: the one master.
//
// A master that fails over during the scan can miss keys; the caller retries the whole flush on
// any error (the follower's apply() does), and a page's keys are deleted before the next page.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace lockstep {

class RedisClient;

// Calls `page` with each non-empty page of matching keys. Throws the client's errors.
void scan_every_master(RedisClient& redis, const std::string& pattern,
                       const std::function<void(const std::vector<std::string>&)>& page);

}  // namespace lockstep
