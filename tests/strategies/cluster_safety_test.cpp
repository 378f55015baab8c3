// Redis Cluster safety: every key one operation touches shares the entity's hash tag.
//
// Two proofs. (1) A recording EntryStore sees every key the repository hands to the cache, for
// every operation under every strategy, and checks each call's keys against the tag of the id.
// (2) The repository runs, with every strategy and lock mode, against a real redis-server in
// cluster mode (one node owning all 16384 slots): a script that touched keys of two slots, or an
// undeclared key of another slot, would fail there with a CROSSSLOT / non-local-key error, which
// the repository would count as a cache error. The test asserts there were none.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "strategies_test_support.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

class RecordingStore final : public EntryStore {
public:
    explicit RecordingStore(std::shared_ptr<EntryStore> inner) : inner_(std::move(inner)) {}

    std::optional<std::string> get(const std::string& key) override { return note({key}), inner_->get(key); }
    std::vector<std::optional<std::string>> get_many(const std::vector<std::string>& keys) override {
        for (const auto& k : keys) note({k});  // one GET per key in the pipeline
        return inner_->get_many(keys);
    }
    Claim claim(const std::string& key, const std::string& marker, std::chrono::milliseconds ttl) override {
        return note({key}), inner_->claim(key, marker, ttl);
    }
    std::vector<Claim> claim_many(const std::vector<std::string>& keys, const std::vector<std::string>& markers,
                                  std::chrono::milliseconds ttl) override {
        for (const auto& k : keys) note({k});
        return inner_->claim_many(keys, markers, ttl);
    }
    FillOutcome fill(const Fill& f) override { return note({f.key}), inner_->fill(f); }
    std::vector<FillOutcome> fill_many(const std::vector<Fill>& fills) override {
        for (const auto& f : fills) note({f.key});
        return inner_->fill_many(fills);
    }
    bool remove_if_equals(const std::string& key, const std::string& expected) override {
        return note({key}), inner_->remove_if_equals(key, expected);
    }
    void remove(const std::vector<std::string>& keys) override {
        for (const auto& k : keys) note({k});  // one DEL per key
        inner_->remove(keys);
    }

    std::vector<std::vector<std::string>> calls() {
        std::lock_guard lock(mutex_);
        return calls_;
    }

private:
    void note(std::vector<std::string> keys) {
        std::lock_guard lock(mutex_);
        calls_.push_back(std::move(keys));
    }
    std::shared_ptr<EntryStore> inner_;
    std::mutex mutex_;
    std::vector<std::vector<std::string>> calls_;
};

// Runs every repository operation on `ids` (the first exists, the second does not yet).
void exercise(CachedRepository<Product>& repo, std::int64_t existing, std::int64_t fresh) {
    repo.get(existing);
    repo.get(existing);
    repo.get(fresh);
    repo.get_many({existing, fresh});
    repo.update(existing, [](Product& p) { p.price += 1; });
    repo.get_many({existing, fresh});
    repo.insert(Product{fresh, "fresh", 1, 1});
    repo.get(fresh);
    repo.remove(fresh);
    repo.get(fresh);
    ASSERT_TRUE(repo.settle(10s));
}

const char* const kAllStrategies[] = {"WriteThenDelete", "DelayedDoubleDelete:20", "TtlBounding:5000",
                                      "WriteThrough", "Lease"};

TEST(ClusterSafetyTest, EveryCacheCallTouchesOnlyKeysOfOneIdsHashTag) {
    ProductCleanup cleanup;
    for (const char* s : kAllStrategies) {
        for (auto mode : {LockMode::None, LockMode::Mutex, LockMode::ReadWrite}) {
            auto store = std::make_shared<RecordingStore>(make_redis_entry_store(redis()));
            RepositoryOptions o;
            o.key_prefix = unique_key_prefix();
            o.strategy = strategy_named(s);
            o.lock_mode = mode;
            o.lock_service = &lock_service();
            CachedRepository<Product> repo(product_entity(), db(), store, o);
            const auto existing = cleanup.add(unique_id());
            const auto fresh = cleanup.add(unique_id());
            insert_product(existing, 1);
            exercise(repo, existing, fresh);
            const std::set<std::string> tags = {"product:" + std::to_string(existing), "product:" + std::to_string(fresh)};
            auto calls = store->calls();
            EXPECT_FALSE(calls.empty());
            for (const auto& keys : calls) {
                ASSERT_FALSE(keys.empty());
                const auto tag = std::string(redis_hash_tag(keys[0]));
                EXPECT_TRUE(tags.count(tag)) << s << ": key " << keys[0] << " has tag " << tag;
                for (const auto& k : keys) EXPECT_EQ(redis_hash_tag(k), tag) << s << ": one call, two tags";
                for (const auto& k : keys) EXPECT_EQ(k.rfind(o.key_prefix, 0), 0u) << k;
            }
            // The lock of an id lives in the same slot as its entry.
            const auto lock = locks().keys(repo.keys().lock_name(existing));
            for (const auto& k : {lock.mutex(), lock.rw_writer(), lock.rw_readers(), lock.fence()}) {
                EXPECT_EQ(redis_hash_tag(k), redis_hash_tag(repo.key_of(existing))) << k;
            }
            EXPECT_EQ(repo.metrics().cache_errors, 0u) << s;
            redis().del({repo.key_of(existing), repo.key_of(fresh)});
        }
    }
}

// A private redis-server in cluster mode, one node owning every slot, in a temp dir under
// $TMPDIR. Killed and removed by the destructor.
class ClusterNode {
public:
    ClusterNode() {
        const char* tmp = std::getenv("TMPDIR");
        std::string tmpl = std::string(tmp ? tmp : "/tmp") + "/lockstep-cluster-XXXXXX";
        if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        dir_ = tmpl;
        // A free port can be taken by someone else before redis-server binds it: try a few.
        for (int attempt = 0; attempt < 5 && !start(); ++attempt) {
        }
        if (!server_) {
            auto log = log_tail();
            std::filesystem::remove_all(dir_);
            throw std::runtime_error("cluster-mode redis-server did not come up: " + log);
        }
    }
    ~ClusterNode() {
        stop();
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    RedisOptions options() const {
        RedisOptions o;
        o.port = port_;
        o.pool_size = 16;
        return o;
    }

private:
    // Starts the server, gives it every slot, waits until the cluster is ok. False if it exited.
    bool start() {
        port_ = free_port();
        std::vector<std::string> args = {"redis-server", "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                         "--cluster-enabled", "yes", "--cluster-config-file",
                                         dir_ + "/nodes-" + std::to_string(port_) + ".conf", "--dir", dir_, "--save",
                                         "", "--appendonly", "no", "--protected-mode", "no", "--logfile",
                                         dir_ + "/redis.log"};
        try {
            server_ = std::make_unique<lockstep::testing::ChildProcess>(
                args, std::map<std::string, std::string>{}, "redis-server");
        } catch (const Error&) {
            return false;
        }
        auto deadline = std::chrono::steady_clock::now() + 20s;
        while (std::chrono::steady_clock::now() < deadline) {
            if (server_->wait_for(0ms)) {  // it exited (port taken?)
                server_.reset();
                return false;
            }
            try {
                RedisOptions o = options();
                o.connect_timeout = 200ms;
                RedisClient c(o);
                c.command({"PING"});
                auto info = c.command({"CLUSTER", "INFO"}).str();
                if (info.find("cluster_slots_assigned:16384") == std::string::npos) {
                    c.command({"CLUSTER", "ADDSLOTSRANGE", "0", "16383"});
                }
                if (info.find("cluster_state:ok") != std::string::npos) return true;
            } catch (const Error&) {
            }
            std::this_thread::sleep_for(20ms);
        }
        stop();
        return false;
    }
    void stop() { server_.reset(); }  // SIGKILLs and reaps it
    std::string log_tail() const {
        std::ifstream in(dir_ + "/redis.log");
        std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
    }
    static int free_port() {
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
        socklen_t len = sizeof addr;
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
        int port = ntohs(addr.sin_port);
        ::close(fd);
        return port;
    }
    std::string dir_;
    int port_ = 0;
    std::unique_ptr<lockstep::testing::ChildProcess> server_;  // the redis-server; null when none runs
};

TEST(ClusterSafetyTest, EveryStrategyAndLockModeRunsOnARedisClusterNode) {
    ClusterNode node;
    RedisClient client(node.options());
    // Proof that the node enforces slots: a script over keys of two slots is refused.
    EXPECT_THROW(client.eval(RedisScript("return redis.call('GET', KEYS[1])"), {"{a}x", "{b}y"}, {}), ProtocolError);

    RedisLockClient lock_client(client);
    RedisLockService lock_service(lock_client);
    ProductCleanup cleanup;
    for (const char* s : kAllStrategies) {
        for (auto mode : {LockMode::None, LockMode::Mutex, LockMode::ReadWrite}) {
            SCOPED_TRACE(std::string(s) + " x " + std::string(to_string(mode)));
            RepositoryOptions o;
            o.key_prefix = unique_key_prefix();
            o.strategy = strategy_named(s);
            o.lock_mode = mode;
            o.lock_service = &lock_service;
            CachedRepository<Product> repo(product_entity(), db(), client, o);
            const auto existing = cleanup.add(unique_id());
            const auto fresh = cleanup.add(unique_id());
            insert_product(existing, 1);
            exercise(repo, existing, fresh);
            auto m = repo.metrics();
            EXPECT_EQ(m.cache_errors, 0u) << s << " x " << to_string(mode) << ": " << to_string(m);
            EXPECT_GT(m.hits, 0u) << s << " x " << to_string(mode);
        }
    }
}

}  // namespace
}  // namespace lockstep::test
