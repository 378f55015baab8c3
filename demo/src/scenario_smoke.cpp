// smoke: connects to both servers and says which they are. The first thing to run on a new
// machine: if this passes, every other scenario can reach its servers.
#include <chrono>
#include <string>

#include "context.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/db/mysql_pool.h"
#include "scenarios.h"

namespace lockstep::demo {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string redis_version(RedisClient& redis) {
    std::string info = redis.command({"INFO", "server"}).str();
    auto at = info.find("redis_version:");
    if (at == std::string::npos) return "?";
    at += 14;
    return info.substr(at, info.find_first_of("\r\n", at) - at);
}

void run(DemoContext& ctx, const RaceCase& c) {
    auto& redis = ctx.services().redis();
    auto& db = ctx.services().db();
    // Not a race: "prevented" here means that nothing went wrong.
    auto row = ctx.row(c, "-", Mode::Forced);
    if (!row) return;
    Result& r = *row;

    auto t0 = std::chrono::steady_clock::now();
    std::string pong = redis.command({"PING"}).str();
    double ping_ms = ms_since(t0);
    std::string rv = redis_version(redis);

    t0 = std::chrono::steady_clock::now();
    auto one = db.query_one("SELECT 1 AS one");
    double select_ms = ms_since(t0);
    std::string mv = db.query_one("SELECT VERSION() AS v")->get<std::string>("v");

    bool ok = pong == "PONG" && one && one->get<int>("one") == 1;
    r.observed = ok ? Outcome::Prevented : Outcome::Reproduced;
    r.evidence = "PING -> " + pong + " (Redis " + rv + "), SELECT 1 -> " +
                 (one ? std::to_string(one->get<int>("one")) : "nothing") + " (MariaDB " + mv + ")";
    char cost[96];
    std::snprintf(cost, sizeof cost, "PING %.2f ms, SELECT 1 %.2f ms", ping_ms, select_ms);
    r.cost = cost;
    r.metric("redis_ping_ms", ping_ms).metric("mysql_select1_ms", select_ms);
    if (!ok) r.error = "a server answered unexpectedly";
    ctx.add(std::move(r));
}

}  // namespace

void add_smoke() {
    add_scenario({"smoke", "connects to Redis (PING) and MariaDB (SELECT 1) and says which servers answered", {}});
}

// Not a race: its one row is "prevented" when both servers answered.
void add_race_smoke() {
    add_race({"smoke", "-", "nothing: one PING and one SELECT 1", {"the demo process"}, "",
              {{"-", Mode::Forced, Outcome::Prevented}}, run, {}});
}

}  // namespace lockstep::demo
