#include "environment.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "lockstep/core/logging.h"
#include "lockstep/servers/demo_schema.h"

namespace lockstep::bench {

void progress(const std::string& line) {
    std::cerr << "bench: " << line << std::endl;
}

double process_cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double stat_file_cpu_seconds(const std::string& path) {
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = text.rfind(')');
    if (paren == std::string::npos) return 0;
    std::istringstream fields(text.substr(paren + 2));
    std::string skip;
    for (int i = 0; i < 11; ++i) fields >> skip;  // state .. cmajflt: fields 3-13
    long long utime = 0, stime = 0;
    fields >> utime >> stime;
    const long ticks = ::sysconf(_SC_CLK_TCK);
    return static_cast<double>(utime + stime) / static_cast<double>(ticks > 0 ? ticks : 100);
}

double machine_busy_seconds() {
    std::ifstream in("/proc/stat");
    std::string cpu;
    long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    const long ticks = ::sysconf(_SC_CLK_TCK);
    return static_cast<double>(user + nice + system + irq + softirq + steal) /
           static_cast<double>(ticks > 0 ? ticks : 100);
}

long long process_context_switches() {
    long long total = 0;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
        std::ifstream status(task.path() / "status");
        std::string line;
        while (std::getline(status, line)) {
            if (line.rfind("voluntary_ctxt_switches:", 0) == 0 ||
                line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) {
                total += std::stoll(line.substr(line.find(':') + 1));
            }
        }
    }
    return total;
}

namespace {
// Every benchmark runs up to 64 threads against one client: no caller should wait for a slot.
constexpr std::size_t kRedisPool = 80;
constexpr std::size_t kMysqlPool = 40;
}  // namespace

Environment::Environment(Budget budget) : budget_(budget) {
    progress("starting redis-server and mariadbd (or using LOCKSTEP_REDIS_URL / LOCKSTEP_MYSQL_URL)");
    auto t0 = std::chrono::steady_clock::now();
    servers_ = std::make_unique<LocalServers>();
    redis_options_ = servers_->redis_options();
    redis_options_.pool_size = std::max(redis_options_.pool_size, kRedisPool);
    mysql_options_ = servers_->mysql_options();
    mysql_options_.pool_size = std::max(mysql_options_.pool_size, kMysqlPool);
    redis_ = std::make_unique<RedisClient>(redis_options_);
    db_ = std::make_unique<MysqlPool>(mysql_options_);
    lockstep::testing::bootstrap_demo_schema(*db_);
#if LOCKSTEP_BENCH_HAS_LOCKS
    LockClientOptions lo;
    lo.prefix = "lsb" + std::to_string(::getpid()) + ":";
    locks_ = std::make_unique<RedisLockClient>(*redis_, lo);
    lock_service_ = std::make_unique<RedisLockService>(*locks_);
#endif
    prefix_ = "lsb" + std::to_string(::getpid()) + ":";
    // Ids of this process only, so that runs against a shared external database do not meet.
    first_id_ = 7'000'000'000'000LL + static_cast<std::int64_t>(::getpid()) * 100'000;
    next_id_ = first_id_;
    db_->execute("DELETE FROM products WHERE id >= ? AND id < ?", {first_id_, first_id_ + 100'000});
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    progress("servers ready in " + std::to_string(ms.count()) + " ms: redis " +
             servers_->redis_options().host + ":" + std::to_string(redis_options_.port) + ", mysql " +
             mysql_options_.host + ":" + std::to_string(mysql_options_.port));
}

Environment::~Environment() {
    try {
        db_->execute("DELETE FROM products WHERE id >= ? AND id < ?", {first_id_, next_id_.load()});
        db_->execute("DELETE FROM orders WHERE product_id >= ? AND product_id < ?",
                     {first_id_, next_id_.load()});
    } catch (const std::exception& e) {
        logger()->warn("bench: cleaning up product rows: {}", e.what());
    }
#if LOCKSTEP_BENCH_HAS_LOCKS
    lock_service_.reset();
    locks_.reset();
#endif
    db_.reset();
    redis_.reset();
    servers_.reset();
}

int Environment::mysql_pid() const {
    return servers_->owns_mysql() ? servers_->mysql_pid() : 0;
}

bool Environment::private_servers() const {
    return servers_->owns_redis() && servers_->owns_mysql();
}

std::int64_t Environment::new_ids(int n) {
    return next_id_.fetch_add(n);
}

void Environment::insert_product(std::int64_t id, long long stock) {
    db_->execute("INSERT INTO products (id, name, price, stock, version, fence) VALUES (?, ?, ?, ?, 1, 0)",
                 {id, "bench item " + std::to_string(id), 1999, stock});
}

std::string Environment::redis_version() {
    const std::string info = redis_->command({"INFO", "server"}).str();
    const std::string field = "redis_version:";
    auto at = info.find(field);
    if (at == std::string::npos) return "?";
    at += field.size();
    return info.substr(at, info.find_first_of("\r\n", at) - at);
}

std::map<std::string, Environment::CommandStat> Environment::command_stats() {
    // Lines like "cmdstat_evalsha:calls=12,usec=345,usec_per_call=28.75,...".
    std::map<std::string, CommandStat> out;
    for (const std::string& info : info_of_masters("commandstats")) {
        std::size_t at = 0;
        while ((at = info.find("cmdstat_", at)) != std::string::npos) {
            const std::size_t colon = info.find(':', at);
            const std::size_t eol = info.find_first_of("\r\n", at);
            if (colon == std::string::npos || colon > eol) break;
            const std::string name = info.substr(at + 8, colon - at - 8);
            const std::string fields = info.substr(colon + 1, eol - colon - 1);
            auto number = [&](const std::string& key) -> long long {
                auto p = fields.find(key + "=");
                return p == std::string::npos ? 0 : std::stoll(fields.substr(p + key.size() + 1));
            };
            out[name].calls += number("calls");
            out[name].usec += number("usec");
            at = eol;
        }
    }
    return out;
}

double Environment::redis_cpu_seconds() {
    double total = 0;
    for (const std::string& info : info_of_masters("cpu")) {
        auto field = [&](const std::string& name) {
            auto at = info.find(name + ":");
            return at == std::string::npos ? 0.0 : std::stod(info.substr(at + name.size() + 1));
        };
        total += field("used_cpu_sys") + field("used_cpu_user");
    }
    return total;
}

std::vector<std::string> Environment::info_of_masters(const char* section) {
    if (redis_options_.topology != RedisTopology::Cluster) return {redis_->command({"INFO", section}).str()};
    std::lock_guard lock(masters_mutex_);
    if (masters_.empty()) {
        for (const RedisOptions& o : raw_master_options(*redis_))
            masters_.push_back(std::make_unique<RawRedis>(o));
    }
    std::vector<std::string> out;
    for (auto& m : masters_) {
        auto r = m->command({"INFO", section});
        out.emplace_back(r->str, r->len);
    }
    return out;
}

std::string Environment::mariadb_version() {
    auto row = db_->query_one("SELECT VERSION() AS v");
    return row ? row->get<std::string>("v") : "?";
}

#ifdef LOCKSTEP_HAVE_ZOOKEEPER
LocalZooKeeper& shared_zookeeper() {
    static LocalZooKeeper zk{LocalZooKeeperOptions{}};
    return zk;
}
#endif

}  // namespace lockstep::bench
