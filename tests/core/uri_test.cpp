// URI parsing: every malformed redis:// and mysql:// URL is a ConfigError naming the offending
// part; well-formed URLs fill every option; to_url is the inverse of parse.
#include "lockstep/core/uri.h"

#include <gtest/gtest.h>

#include <chrono>
#include <ostream>
#include <string>

#include "lockstep/core/error.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;

// gtest has no operator== for the option structs (they are plain structs without one), so the
// tests compare field by field and print the URL form on failure.
void expect_same(const RedisOptions& a, const RedisOptions& b) {
    EXPECT_EQ(a.host, b.host);
    EXPECT_EQ(a.port, b.port);
    EXPECT_EQ(a.user, b.user);
    EXPECT_EQ(a.password, b.password);
    EXPECT_EQ(a.db, b.db);
    EXPECT_EQ(a.connect_timeout, b.connect_timeout);
    EXPECT_EQ(a.socket_timeout, b.socket_timeout);
    EXPECT_EQ(a.pool_size, b.pool_size);
    EXPECT_EQ(a.pool_wait_timeout, b.pool_wait_timeout);
}

void expect_same(const MysqlOptions& a, const MysqlOptions& b) {
    EXPECT_EQ(a.host, b.host);
    EXPECT_EQ(a.port, b.port);
    EXPECT_EQ(a.user, b.user);
    EXPECT_EQ(a.password, b.password);
    EXPECT_EQ(a.database, b.database);
    EXPECT_EQ(a.connect_timeout, b.connect_timeout);
    EXPECT_EQ(a.read_timeout, b.read_timeout);
    EXPECT_EQ(a.write_timeout, b.write_timeout);
    EXPECT_EQ(a.pool_size, b.pool_size);
    EXPECT_EQ(a.pool_wait_timeout, b.pool_wait_timeout);
    EXPECT_EQ(a.validation_interval, b.validation_interval);
    EXPECT_EQ(a.statement_cache_size, b.statement_cache_size);
    EXPECT_EQ(a.tls.mode, b.tls.mode);
    EXPECT_EQ(a.tls.ca_file, b.tls.ca_file);
    EXPECT_EQ(a.tls.cert_file, b.tls.cert_file);
    EXPECT_EQ(a.tls.key_file, b.tls.key_file);
}

// One malformed URL and the part its ConfigError must name.
struct Malformed {
    const char* name;  // gtest test-name suffix
    std::string url;
    std::string part;
};

std::ostream& operator<<(std::ostream& os, const Malformed& m) {
    return os << "'" << m.url << "' (expected part '" << m.part << "')";
}

std::string case_name(const testing::TestParamInfo<Malformed>& info) {
    return info.param.name;
}

template <class Parse>
void expect_config_error(Parse parse, const Malformed& m) {
    try {
        parse(m.url);
        ADD_FAILURE() << "accepted malformed URL " << m;
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.part(), m.part) << "for " << m << ": " << e.what();
        EXPECT_EQ(e.recovery(), Recovery::GiveUp);
    } catch (const std::exception& e) {
        ADD_FAILURE() << "not a ConfigError for " << m << ": " << e.what();
    }
}

// ---------------------------------------------------------------------------------------------
// redis://

class MalformedRedisUrl : public testing::TestWithParam<Malformed> {};

TEST_P(MalformedRedisUrl, IsAConfigErrorNamingThePart) {
    expect_config_error([](const std::string& url) { return parse_redis_url(url); }, GetParam());
}

const std::string kQp = "query parameter ";

// One row per malformed URL: easier to read than what clang-format would pack.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Table, MalformedRedisUrl,
    testing::Values(
        Malformed{"Empty", "", "url"},
        Malformed{"HttpScheme", "http://localhost:6379", "scheme"},
        Malformed{"NoScheme", "localhost:6379", "scheme"},
        Malformed{"TlsParameterOnAPlainClusterUrl", "redis+cluster://a:1?tls_ca=/ca.pem", kQp + "'tls_ca'"},
        Malformed{"TlsClusterWithADatabase", "rediss+cluster://a:1/2", "database"},
        Malformed{"TlsParameterOnAPlainUrl", "redis://localhost?tls_ca=/etc/ca.pem", kQp + "'tls_ca'"},
        Malformed{"TlsVerifyUnknownValue", "rediss://localhost?tls_verify=strict", kQp + "'tls_verify'"},
        Malformed{"TlsVerifyIsCaseSensitive", "rediss://localhost?tls_verify=Full", kQp + "'tls_verify'"},
        Malformed{"TlsCaEmpty", "rediss://localhost?tls_ca=", kQp + "'tls_ca'"},
        Malformed{"TlsCertWithoutKey", "rediss://localhost?tls_cert=/c.pem", kQp + "'tls_key'"},
        Malformed{"TlsKeyWithoutCert", "rediss://localhost?tls_key=/k.pem", kQp + "'tls_cert'"},
        Malformed{"TlsServerNameWithSpace", "rediss://localhost?tls_server_name=a%20b", kQp + "'tls_server_name'"},
        Malformed{"TlsUnknownParameter", "rediss://localhost?tls_ciphers=HIGH", kQp + "'tls_ciphers'"},
        Malformed{"TlsParameterGivenTwice", "rediss://localhost?tls_ca=/a&tls_ca=/b", kQp + "'tls_ca'"},
        Malformed{"TlsPasswordWithoutColon", "rediss://secret@localhost", "password"},
        Malformed{"TlsOneSlash", "rediss:/localhost", "scheme"},
        Malformed{"OneSlash", "redis:/localhost", "scheme"},
        Malformed{"NothingAfterScheme", "redis://", "host"},
        Malformed{"OnlyPath", "redis:///0", "host"},
        Malformed{"PortWithoutHost", "redis://:6379", "host"},
        Malformed{"CredentialsWithoutHost", "redis://:secret@", "host"},
        Malformed{"SpaceInHost", "redis://local host", "host"},
        Malformed{"UnbracketedIpv6", "redis://::1:6379", "host"},
        Malformed{"UnterminatedBracket", "redis://[::1:6379", "host"},
        Malformed{"TextAfterBracket", "redis://[::1]6379", "host"},
        Malformed{"EmptyBrackets", "redis://[]:6379", "host"},
        Malformed{"EmptyPort", "redis://localhost:", "port"},
        Malformed{"PortZero", "redis://localhost:0", "port"},
        Malformed{"PortTooLarge", "redis://localhost:65536", "port"},
        Malformed{"PortNotANumber", "redis://localhost:http", "port"},
        Malformed{"NegativePort", "redis://localhost:-1", "port"},
        Malformed{"PortOverflow", "redis://localhost:99999999999999999999", "port"},
        Malformed{"PortWithSign", "redis://localhost:+6379", "port"},
        Malformed{"EmptyIpv6Port", "redis://[::1]:", "port"},
        Malformed{"PasswordWithoutColon", "redis://secret@localhost", "password"},
        Malformed{"EmptyUserinfo", "redis://@localhost", "password"},
        Malformed{"EmptyPassword", "redis://:@localhost", "password"},
        Malformed{"UserWithEmptyPassword", "redis://alice:@localhost", "password"},
        Malformed{"BadEscapeInPassword", "redis://:pa%zzss@localhost", "password"},
        Malformed{"TruncatedEscapeInPassword", "redis://:pass%4@localhost", "password"},
        Malformed{"BadEscapeInUser", "redis://al%g0ice:pass@localhost", "user"},
        Malformed{"DbNotANumber", "redis://localhost/abc", "database"},
        Malformed{"NegativeDb", "redis://localhost/-1", "database"},
        Malformed{"DbTooLarge", "redis://localhost/1000001", "database"},
        Malformed{"TwoPathSegments", "redis://localhost/0/1", "database"},
        Malformed{"Fragment", "redis://localhost/0#top", "url"},
        Malformed{"FragmentAfterQuery", "redis://localhost/0?pool_size=2#top", "url"},
        Malformed{"QuestionMarkAlone", "redis://localhost/0?", "query"},
        Malformed{"LeadingAmpersand", "redis://localhost/0?&pool_size=2", "query"},
        Malformed{"DoubleAmpersand", "redis://localhost/0?pool_size=2&&socket_timeout=1s", "query"},
        Malformed{"TrailingAmpersand", "redis://localhost/0?pool_size=2&", "query"},
        Malformed{"EmptyParameterName", "redis://localhost/0?=5", "query"},
        Malformed{"ParameterWithoutValue", "redis://localhost/0?pool_size", kQp + "'pool_size'"},
        Malformed{"PoolSizeZero", "redis://localhost/0?pool_size=0", kQp + "'pool_size'"},
        Malformed{"PoolSizeTooLarge", "redis://localhost/0?pool_size=10001", kQp + "'pool_size'"},
        Malformed{"PoolSizeNotANumber", "redis://localhost/0?pool_size=two", kQp + "'pool_size'"},
        Malformed{"PoolSizeEmpty", "redis://localhost/0?pool_size=", kQp + "'pool_size'"},
        Malformed{"ParameterGivenTwice", "redis://localhost/0?pool_size=2&pool_size=3", kQp + "'pool_size'"},
        Malformed{"ConnectTimeoutZero", "redis://localhost/0?connect_timeout=0", kQp + "'connect_timeout'"},
        Malformed{"SocketTimeoutZero", "redis://localhost/0?socket_timeout=0ms", kQp + "'socket_timeout'"},
        Malformed{"UnknownUnit", "redis://localhost/0?connect_timeout=5h", kQp + "'connect_timeout'"},
        Malformed{"UnitWithoutNumber", "redis://localhost/0?connect_timeout=ms", kQp + "'connect_timeout'"},
        Malformed{"FractionBelowAMillisecond", "redis://localhost/0?socket_timeout=1.5ms", kQp + "'socket_timeout'"},
        Malformed{"FractionWithoutDigits", "redis://localhost/0?socket_timeout=1.s", kQp + "'socket_timeout'"},
        Malformed{"FractionWithoutWholePart", "redis://localhost/0?socket_timeout=.5s", kQp + "'socket_timeout'"},
        Malformed{"NegativeDuration", "redis://localhost/0?socket_timeout=-1s", kQp + "'socket_timeout'"},
        Malformed{"SpaceBeforeUnit", "redis://localhost/0?socket_timeout=5%20s", kQp + "'socket_timeout'"},
        Malformed{"DurationLongerThanADay", "redis://localhost/0?pool_wait_timeout=1441m",
                  kQp + "'pool_wait_timeout'"},
        Malformed{"EmptyDuration", "redis://localhost/0?pool_wait_timeout=", kQp + "'pool_wait_timeout'"},
        Malformed{"BadEscapeInValue", "redis://localhost/0?connect_timeout=1%zzs", kQp + "'connect_timeout'"},
        Malformed{"MysqlOnlyParameter", "redis://localhost/0?read_timeout=1s", kQp + "'read_timeout'"},
        Malformed{"ParameterNamesAreCaseSensitive", "redis://localhost/0?Pool_size=2", kQp + "'Pool_size'"}),
    case_name);
// clang-format on

TEST(RedisUrl, HostOnlyKeepsEveryDefault) {
    RedisOptions o = parse_redis_url("redis://cache.example");
    RedisOptions d;
    d.host = "cache.example";
    expect_same(o, d);
}

TEST(RedisUrl, UserAndPassword) {
    RedisOptions o = parse_redis_url("redis://alice:s3cret@10.0.0.7:6380");
    EXPECT_EQ(o.user, "alice");
    EXPECT_EQ(o.password, "s3cret");
    EXPECT_EQ(o.host, "10.0.0.7");
    EXPECT_EQ(o.port, 6380);
}

TEST(RedisUrl, PasswordOnlyMeansLegacyAuth) {
    RedisOptions o = parse_redis_url("redis://:s3cret@localhost");
    EXPECT_EQ(o.user, "");
    EXPECT_EQ(o.password, "s3cret");
    EXPECT_EQ(o.port, 6379);
}

TEST(RedisUrl, PercentEncodedCredentials) {
    RedisOptions o = parse_redis_url("redis://al%40ice:p%40ss%3Aw%2Fo%25rd%3f@localhost");
    EXPECT_EQ(o.user, "al@ice");
    EXPECT_EQ(o.password, "p@ss:w/o%rd?");
}

TEST(RedisUrl, PasswordMayContainAColon) {
    EXPECT_EQ(parse_redis_url("redis://u:a:b@localhost").password, "a:b");
}

TEST(RedisUrl, Ipv6InBrackets) {
    RedisOptions o = parse_redis_url("redis://[::1]:7000/2");
    EXPECT_EQ(o.host, "::1");
    EXPECT_EQ(o.port, 7000);
    EXPECT_EQ(o.db, 2);
    EXPECT_EQ(parse_redis_url("redis://[fe80::1:2]").host, "fe80::1:2");
    EXPECT_EQ(parse_redis_url("redis://[fe80::1:2]").port, 6379);
}

TEST(RedisUrl, DatabaseIndex) {
    EXPECT_EQ(parse_redis_url("redis://localhost/15").db, 15);
    EXPECT_EQ(parse_redis_url("redis://localhost/0").db, 0);
    EXPECT_EQ(parse_redis_url("redis://localhost/").db, 0);  // empty path: the default
    EXPECT_EQ(parse_redis_url("redis://localhost:6379/3?pool_size=1").db, 3);
}

TEST(RedisUrl, EveryQueryParameter) {
    RedisOptions o = parse_redis_url(
        "redis://localhost/1?connect_timeout=250ms&socket_timeout=2s&pool_size=32&pool_wait_timeout=1m");
    EXPECT_EQ(o.connect_timeout, 250ms);
    EXPECT_EQ(o.socket_timeout, 2s);
    EXPECT_EQ(o.pool_size, 32u);
    EXPECT_EQ(o.pool_wait_timeout, 1min);
}

TEST(RedisUrl, QueryWithoutPath) {
    EXPECT_EQ(parse_redis_url("redis://localhost:6379?pool_size=3").pool_size, 3u);
}

TEST(RedisUrl, PoolWaitTimeoutMayBeZero) {
    // Zero means "do not wait for a pooled connection", which is meaningful; the socket
    // deadlines are not.
    EXPECT_EQ(parse_redis_url("redis://localhost?pool_wait_timeout=0").pool_wait_timeout, 0ms);
}

TEST(RedisUrl, RoundTripsThroughToUrl) {
    RedisOptions defaults;
    RedisOptions full;
    full.host = "::1";
    full.port = 7001;
    full.user = "ali ce@corp";
    full.password = "p@ss:w/o%rd?&=#";
    full.db = 9;
    full.connect_timeout = 1500ms;
    full.socket_timeout = 2min;
    full.pool_size = 1;
    full.pool_wait_timeout = 0ms;
    RedisOptions password_only;
    password_only.host = "redis.internal";
    password_only.password = "secret";
    for (const RedisOptions& o : {defaults, full, password_only}) {
        SCOPED_TRACE(to_url(o));
        expect_same(parse_redis_url(to_url(o)), o);
    }
}

TEST(RedisUrl, RedissTurnsTlsOnWithFullVerificationAndTheSystemStore) {
    const RedisOptions o = parse_redis_url("rediss://:pw@cache.example:6380/2");
    EXPECT_TRUE(o.tls.enabled);
    EXPECT_EQ(o.tls.verify, RedisTlsVerify::Full);
    EXPECT_EQ(o.tls.ca_file, "");
    EXPECT_EQ(o.tls.cert_file, "");
    EXPECT_EQ(o.tls.server_name, "");
    EXPECT_EQ(o.host, "cache.example");
    EXPECT_EQ(o.port, 6380);
    EXPECT_EQ(o.db, 2);
    EXPECT_EQ(o.password, "pw");
    EXPECT_FALSE(parse_redis_url("redis://cache.example").tls.enabled);
}

TEST(RedisUrl, EveryTlsParameter) {
    const RedisOptions o = parse_redis_url(
        "rediss://10.0.0.7:6380?tls_ca=/etc/redis/ca.pem&tls_cert=/etc/redis/client.pem&tls_key=%2Fetc%2Fredis%2Fclient.key"
        "&tls_verify=ca&tls_server_name=redis.internal&socket_timeout=2s");
    EXPECT_EQ(o.tls.ca_file, "/etc/redis/ca.pem");
    EXPECT_EQ(o.tls.cert_file, "/etc/redis/client.pem");
    EXPECT_EQ(o.tls.key_file, "/etc/redis/client.key");
    EXPECT_EQ(o.tls.verify, RedisTlsVerify::Ca);
    EXPECT_EQ(o.tls.server_name, "redis.internal");
    EXPECT_EQ(o.socket_timeout, 2s);
    EXPECT_EQ(parse_redis_url("rediss://h?tls_verify=none").tls.verify, RedisTlsVerify::None);
    EXPECT_EQ(parse_redis_url("rediss://h?tls_verify=full").tls.verify, RedisTlsVerify::Full);
}

TEST(RedisUrl, ATlsErrorNeverShowsThePassword) {
    for (const char* url : {"rediss://:hunter2@h?tls_verify=maybe", "redis://u:hunter2@h?tls_ca=/ca.pem",
                            "rediss+cluster://:hunter2@a:1?tls_verify=maybe"}) {
        try {
            parse_redis_url(url);
            ADD_FAILURE() << "accepted " << url;
        } catch (const ConfigError& e) {
            EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
        }
    }
}

TEST(RedisUrl, RedissClusterAndSentinelTurnTlsOnForEveryNode) {
    const RedisOptions c = parse_redis_url("rediss+cluster://:pw@a:7000,b:7001?tls_ca=/ca.pem&tls_verify=ca");
    EXPECT_EQ(c.topology, RedisTopology::Cluster);
    EXPECT_TRUE(c.tls.enabled);
    EXPECT_EQ(c.tls.ca_file, "/ca.pem");
    EXPECT_EQ(c.tls.verify, RedisTlsVerify::Ca);
    ASSERT_EQ(c.nodes.size(), 2u);
    EXPECT_EQ(c.nodes[1].port, 7001);
    EXPECT_EQ(c.password, "pw");
    const RedisOptions s = parse_redis_url("rediss+sentinel://a,b:26380/mymaster?tls_ca=/ca.pem");
    EXPECT_EQ(s.topology, RedisTopology::Sentinel);
    EXPECT_TRUE(s.tls.enabled);
    EXPECT_EQ(s.sentinel_master, "mymaster");
    EXPECT_EQ(s.nodes[0].port, 26379);
    EXPECT_FALSE(parse_redis_url("redis+cluster://a:1").tls.enabled);
    for (const RedisOptions& o : {c, s}) {
        SCOPED_TRACE(to_url(o));
        const RedisOptions back = parse_redis_url(to_url(o));
        EXPECT_EQ(back.topology, o.topology);
        EXPECT_TRUE(back.tls.enabled);
        EXPECT_EQ(back.tls.ca_file, "/ca.pem");
        EXPECT_EQ(back.nodes, o.nodes);
    }
}

TEST(RedisUrl, TlsOptionsRoundTripThroughToUrl) {
    RedisOptions o;
    o.host = "127.0.0.1";
    o.password = "p@ss";
    o.tls.enabled = true;
    o.tls.ca_file = "/tmp/lock step/ca&1.pem";
    o.tls.cert_file = "/c.pem";
    o.tls.key_file = "/k.pem";
    o.tls.verify = RedisTlsVerify::None;
    o.tls.server_name = "redis.internal";
    SCOPED_TRACE(to_url(o));
    const RedisOptions back = parse_redis_url(to_url(o));
    expect_same(back, o);
    EXPECT_TRUE(back.tls.enabled);
    EXPECT_EQ(back.tls.ca_file, o.tls.ca_file);
    EXPECT_EQ(back.tls.cert_file, o.tls.cert_file);
    EXPECT_EQ(back.tls.key_file, o.tls.key_file);
    EXPECT_EQ(back.tls.verify, o.tls.verify);
    EXPECT_EQ(back.tls.server_name, o.tls.server_name);
    EXPECT_FALSE(parse_redis_url(to_url(RedisOptions{})).tls.enabled);
}

// ---------------------------------------------------------------------------------------------
// redis+cluster:// and redis+sentinel://

class MalformedTopologyUrl : public testing::TestWithParam<Malformed> {};

TEST_P(MalformedTopologyUrl, IsAConfigErrorNamingThePart) {
    expect_config_error([](const std::string& url) { return parse_redis_url(url); }, GetParam());
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Table, MalformedTopologyUrl,
    testing::Values(
        Malformed{"UnknownPlusScheme", "redis+shard://a:1", "scheme"},
        Malformed{"ClusterNoNodes", "redis+cluster://", "nodes"},
        Malformed{"ClusterOnlyCredentials", "redis+cluster://:pw@/0", "nodes"},
        Malformed{"ClusterStrayLeadingComma", "redis+cluster://,a:7000", "node 1"},
        Malformed{"ClusterStrayTrailingComma", "redis+cluster://a:7000,", "node 2"},
        Malformed{"ClusterDoubleComma", "redis+cluster://a:7000,,b:7001", "node 2"},
        Malformed{"ClusterBadSecondPort", "redis+cluster://a:7000,b:x", "node 2: port"},
        Malformed{"ClusterPortOutOfRange", "redis+cluster://a:70000", "node 1: port"},
        Malformed{"ClusterBadThirdHost", "redis+cluster://a:1,b:2,c d:3", "node 3: host"},
        Malformed{"ClusterNodeTwice", "redis+cluster://a:1,a:1", "node 2"},
        Malformed{"ClusterNonZeroDatabase", "redis+cluster://a:1,b:2/3", "database"},
        Malformed{"ClusterUnknownParameter", "redis+cluster://a:1?shards=3", kQp + "'shards'"},
        Malformed{"ClusterBadPassword", "redis+cluster://secret@a:1", "password"},
        Malformed{"SentinelNoMaster", "redis+sentinel://a:26379,b:26379", "master name"},
        Malformed{"SentinelEmptyMaster", "redis+sentinel://a:26379/", "master name"},
        Malformed{"SentinelEmptyMasterWithQuery", "redis+sentinel://a:26379/?pool_size=2", "master name"},
        Malformed{"SentinelBadMaster", "redis+sentinel://a:26379/my%20master", "master name"},
        Malformed{"SentinelBadPort", "redis+sentinel://a:26379,b:/m", "node 2: port"},
        Malformed{"SentinelBadParameter", "redis+sentinel://a:1/m?pool_size=0", kQp + "'pool_size'"}),
    case_name);
// clang-format on

TEST(RedisTopologyUrl, ClusterListsEverySeedNode) {
    const RedisOptions o = parse_redis_url("redis+cluster://:pw@127.0.0.1:7000,[::1]:7001,redis-c?pool_size=3");
    EXPECT_EQ(o.topology, RedisTopology::Cluster);
    ASSERT_EQ(o.nodes.size(), 3u);
    EXPECT_EQ(o.nodes[0], (RedisEndpoint{"127.0.0.1", 7000}));
    EXPECT_EQ(o.nodes[1], (RedisEndpoint{"::1", 7001}));
    EXPECT_EQ(o.nodes[2], (RedisEndpoint{"redis-c", 6379}));
    EXPECT_EQ(o.host, "127.0.0.1");
    EXPECT_EQ(o.port, 7000);
    EXPECT_EQ(o.password, "pw");
    EXPECT_EQ(o.pool_size, 3u);
}

TEST(RedisTopologyUrl, SentinelNamesTheMasterAndDefaultsToPort26379) {
    const RedisOptions o = parse_redis_url("redis+sentinel://s1,s2:5000/mymaster?socket_timeout=2s");
    EXPECT_EQ(o.topology, RedisTopology::Sentinel);
    EXPECT_EQ(o.sentinel_master, "mymaster");
    ASSERT_EQ(o.nodes.size(), 2u);
    EXPECT_EQ(o.nodes[0], (RedisEndpoint{"s1", 26379}));
    EXPECT_EQ(o.nodes[1], (RedisEndpoint{"s2", 5000}));
    EXPECT_EQ(o.socket_timeout, 2s);
}

TEST(RedisTopologyUrl, RoundTripsThroughToUrl) {
    for (const char* url : {"redis+cluster://127.0.0.1:7000,127.0.0.1:7001", "redis+sentinel://:pw@a:1,b:2/m"}) {
        SCOPED_TRACE(url);
        const RedisOptions o = parse_redis_url(url);
        const RedisOptions back = parse_redis_url(to_url(o));
        expect_same(back, o);
        EXPECT_EQ(back.topology, o.topology);
        EXPECT_EQ(back.nodes, o.nodes);
        EXPECT_EQ(back.sentinel_master, o.sentinel_master);
    }
}

TEST(RedisTopologyUrl, PlainRedisStaysStandalone) {
    const RedisOptions o = parse_redis_url("redis://h:1");
    EXPECT_EQ(o.topology, RedisTopology::Standalone);
    EXPECT_TRUE(o.nodes.empty());
}

// ---------------------------------------------------------------------------------------------
// mysql://

class MalformedMysqlUrl : public testing::TestWithParam<Malformed> {};

TEST_P(MalformedMysqlUrl, IsAConfigErrorNamingThePart) {
    expect_config_error([](const std::string& url) { return parse_mysql_url(url); }, GetParam());
}

// One row per malformed URL: easier to read than what clang-format would pack.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Table, MalformedMysqlUrl,
    testing::Values(
        Malformed{"Empty", "", "url"},
        Malformed{"MariadbScheme", "mariadb://root@localhost/shop", "scheme"},
        Malformed{"RedisScheme", "redis://root@localhost/shop", "scheme"},
        Malformed{"OneSlash", "mysql:/root@localhost/shop", "scheme"},
        Malformed{"TcpUrl", "tcp://127.0.0.1:3306", "scheme"},
        Malformed{"NoUser", "mysql://localhost/shop", "user"},
        Malformed{"EmptyUser", "mysql://@localhost/shop", "user"},
        Malformed{"PasswordWithoutUser", "mysql://:pw@localhost/shop", "user"},
        Malformed{"BadEscapeInUser", "mysql://ro%zzot@localhost/shop", "user"},
        Malformed{"TruncatedEscapeInPassword", "mysql://root:p%4@localhost/shop", "password"},
        Malformed{"NoHost", "mysql://root@/shop", "host"},
        Malformed{"PortWithoutHost", "mysql://root@:3306/shop", "host"},
        Malformed{"BadCharacterInHost", "mysql://root@db!host/shop", "host"},
        Malformed{"UnterminatedBracket", "mysql://root@[::1/shop", "host"},
        Malformed{"UnbracketedIpv6", "mysql://root@fe80::1/shop", "host"},
        Malformed{"EmptyPort", "mysql://root@localhost:/shop", "port"},
        Malformed{"PortTooLarge", "mysql://root@localhost:70000/shop", "port"},
        Malformed{"PortWithTrailingText", "mysql://root@localhost:3306x/shop", "port"},
        Malformed{"NoDatabase", "mysql://root@localhost", "database"},
        Malformed{"EmptyDatabase", "mysql://root@localhost:3306/", "database"},
        Malformed{"DotInDatabase", "mysql://root@localhost/my.shop", "database"},
        Malformed{"EncodedSlashInDatabase", "mysql://root@localhost/shop%2Forders", "database"},
        Malformed{"EncodedNulInDatabase", "mysql://root@localhost/shop%00", "database"},
        Malformed{"EncodedBacktickInDatabase", "mysql://root@localhost/shop%60x", "database"},
        Malformed{"EncodedSpaceInDatabase", "mysql://root@localhost/my%20shop", "database"},
        Malformed{"EncodedNonAsciiInDatabase", "mysql://root@localhost/caf%C3%A9", "database"},
        Malformed{"BadEscapeInDatabase", "mysql://root@localhost/shop%zz", "database"},
        Malformed{"TruncatedEscapeInDatabase", "mysql://root@localhost/shop%4", "database"},
        Malformed{"FractionalReadTimeoutBelowAMillisecond", "mysql://root@localhost/shop?read_timeout=0.0001s",
                  kQp + "'read_timeout'"},
        Malformed{"SlashInDatabase", "mysql://root@localhost/shop/orders", "database"},
        Malformed{"DatabaseTooLong", "mysql://root@localhost/" + std::string(65, 'd'), "database"},
        Malformed{"Fragment", "mysql://root@localhost/shop#x", "url"},
        Malformed{"QuestionMarkAlone", "mysql://root@localhost/shop?", "query"},
        Malformed{"AmpersandAlone", "mysql://root@localhost/shop?&", "query"},
        Malformed{"TrailingAmpersand", "mysql://root@localhost/shop?pool_size=2&", "query"},
        Malformed{"RedisOnlyParameter", "mysql://root@localhost/shop?socket_timeout=1s", kQp + "'socket_timeout'"},
        Malformed{"ReadTimeoutNotADuration", "mysql://root@localhost/shop?read_timeout=fast", kQp + "'read_timeout'"},
        Malformed{"ReadTimeoutWithoutValue", "mysql://root@localhost/shop?read_timeout", kQp + "'read_timeout'"},
        Malformed{"WriteTimeoutInDays", "mysql://root@localhost/shop?write_timeout=2d", kQp + "'write_timeout'"},
        Malformed{"ConnectTimeoutZero", "mysql://root@localhost/shop?connect_timeout=0s", kQp + "'connect_timeout'"},
        Malformed{"ReadTimeoutZero", "mysql://root@localhost/shop?read_timeout=0", kQp + "'read_timeout'"},
        Malformed{"WriteTimeoutZero", "mysql://root@localhost/shop?write_timeout=0ms", kQp + "'write_timeout'"},
        Malformed{"PoolSizeZero", "mysql://root@localhost/shop?pool_size=0", kQp + "'pool_size'"},
        Malformed{"PoolSizeNegative", "mysql://root@localhost/shop?pool_size=-4", kQp + "'pool_size'"},
        Malformed{"PoolWaitLongerThanADay", "mysql://root@localhost/shop?pool_wait_timeout=100000000",
                  kQp + "'pool_wait_timeout'"},
        Malformed{"ParameterGivenTwice", "mysql://root@localhost/shop?pool_size=4&pool_size=4", kQp + "'pool_size'"},
        Malformed{"ValidationIntervalUnit", "mysql://root@localhost/shop?validation_interval=1h", kQp + "'validation_interval'"},
        Malformed{"StatementCacheTooLarge", "mysql://root@localhost/shop?statement_cache_size=10001", kQp + "'statement_cache_size'"},
        Malformed{"StatementCacheNotANumber", "mysql://root@localhost/shop?statement_cache_size=many", kQp + "'statement_cache_size'"},
        Malformed{"TlsModeUnknown", "mysql://root@localhost/shop?tls=true", kQp + "'tls'"},
        Malformed{"TlsModeInCapitals", "mysql://root@localhost/shop?tls=VERIFY_IDENTITY", kQp + "'tls'"},
        Malformed{"TlsModeEmpty", "mysql://root@localhost/shop?tls=", kQp + "'tls'"},
        Malformed{"TlsModeSslModeSpelling", "mysql://root@localhost/shop?ssl_mode=REQUIRED", kQp + "'ssl_mode'"},
        Malformed{"TlsCaEmpty", "mysql://root@localhost/shop?tls=verify_ca&tls_ca=", kQp + "'tls_ca'"},
        Malformed{"TlsCertEmpty", "mysql://root@localhost/shop?tls=required&tls_cert=", kQp + "'tls_cert'"},
        Malformed{"TlsKeyEmpty", "mysql://root@localhost/shop?tls=required&tls_key=", kQp + "'tls_key'"},
        Malformed{"TlsGivenTwice", "mysql://root@localhost/shop?tls=required&tls=verify_ca", kQp + "'tls'"},
        Malformed{"TlsCaBadEscape", "mysql://root@localhost/shop?tls=verify_ca&tls_ca=%zz", kQp + "'tls_ca'"}),
    case_name);
// clang-format on

TEST(MysqlUrl, UserPasswordHostPortDatabase) {
    MysqlOptions o = parse_mysql_url("mysql://app:s3cret@db.example:3307/shop");
    EXPECT_EQ(o.user, "app");
    EXPECT_EQ(o.password, "s3cret");
    EXPECT_EQ(o.host, "db.example");
    EXPECT_EQ(o.port, 3307);
    EXPECT_EQ(o.database, "shop");
}

TEST(MysqlUrl, UserWithoutPasswordKeepsDefaults) {
    MysqlOptions o = parse_mysql_url("mysql://root@localhost/lockstep");
    MysqlOptions d;
    d.host = "localhost";
    d.user = "root";
    d.database = "lockstep";
    expect_same(o, d);
}

TEST(MysqlUrl, EmptyPasswordAfterColonIsAllowed) {
    // MariaDB's root may have an empty password; unlike Redis AUTH that is not ambiguous here.
    MysqlOptions o = parse_mysql_url("mysql://root:@localhost/lockstep");
    EXPECT_EQ(o.user, "root");
    EXPECT_EQ(o.password, "");
}

TEST(MysqlUrl, PercentEncodedPassword) {
    MysqlOptions o = parse_mysql_url("mysql://app%2Bro:p%40ss%2Fw%3Ard%25@localhost/shop");
    EXPECT_EQ(o.user, "app+ro");
    EXPECT_EQ(o.password, "p@ss/w:rd%");
}

TEST(MysqlUrl, Ipv6InBrackets) {
    MysqlOptions o = parse_mysql_url("mysql://root@[::1]:3310/shop");
    EXPECT_EQ(o.host, "::1");
    EXPECT_EQ(o.port, 3310);
}

TEST(MysqlUrl, DatabaseNameCharacters) {
    EXPECT_EQ(parse_mysql_url("mysql://root@localhost/Shop_2$x").database, "Shop_2$x");
    EXPECT_EQ(parse_mysql_url("mysql://root@localhost/" + std::string(64, 'd')).database,
              std::string(64, 'd'));
}

TEST(MysqlUrl, PercentEncodedDatabaseNamesDecodeAndRoundTrip) {
    EXPECT_EQ(parse_mysql_url("mysql://root@localhost/shop%2Deu").database, "shop-eu");
    EXPECT_EQ(parse_mysql_url("mysql://root@localhost/shop-eu").database, "shop-eu");
    EXPECT_EQ(parse_mysql_url("mysql://root@localhost/a%24b%2bc").database, "a$b+c");
    for (const char* db : {"shop-eu", "a$b+c", "x@y", "Shop_2"}) {
        MysqlOptions o = parse_mysql_url(std::string("mysql://root@localhost/") + db);
        EXPECT_EQ(parse_mysql_url(to_url(o)).database, db) << to_url(o);
    }
    // 64 characters after decoding is the limit, whatever the encoded length.
    std::string encoded;
    for (int i = 0; i < 64; ++i) encoded += "%2D";
    EXPECT_EQ(parse_mysql_url("mysql://root@localhost/" + encoded).database, std::string(64, '-'));
    EXPECT_THROW(parse_mysql_url("mysql://root@localhost/" + encoded + "%2D"), ConfigError);
}

TEST(MysqlUrl, EveryQueryParameter) {
    MysqlOptions o = parse_mysql_url(
        "mysql://root@localhost/shop?connect_timeout=750ms&read_timeout=10s&write_timeout=2m&pool_size=16"
        "&pool_wait_timeout=1234&validation_interval=3s&statement_cache_size=0");
    EXPECT_EQ(o.connect_timeout, 750ms);
    EXPECT_EQ(o.read_timeout, 10s);
    EXPECT_EQ(o.write_timeout, 2min);
    EXPECT_EQ(o.pool_size, 16u);
    EXPECT_EQ(o.pool_wait_timeout, 1234ms);
    EXPECT_EQ(o.validation_interval, 3s);
    EXPECT_EQ(o.statement_cache_size, 0u);  // 0 disables the cache
}

TEST(MysqlUrl, TlsIsOffByDefault) {
    const MysqlOptions o = parse_mysql_url("mysql://root@localhost/shop");
    EXPECT_EQ(o.tls.mode, MysqlTlsMode::Disabled);
    EXPECT_EQ(o.tls.ca_file, "");
    EXPECT_EQ(to_url(o).find("tls"), std::string::npos) << "a plain URL stays as it was";
}

TEST(MysqlUrl, TlsModesAndFiles) {
    EXPECT_EQ(parse_mysql_url("mysql://root@db/shop?tls=disabled").tls.mode, MysqlTlsMode::Disabled);
    EXPECT_EQ(parse_mysql_url("mysql://root@db/shop?tls=required").tls.mode, MysqlTlsMode::Required);
    EXPECT_EQ(parse_mysql_url("mysql://root@db/shop?tls=verify_ca").tls.mode, MysqlTlsMode::VerifyCa);
    const MysqlOptions o = parse_mysql_url(
        "mysql://app:pw@db.internal:3307/shop?pool_size=4&tls=verify_identity&tls_ca=/etc/ssl/db/ca.pem"
        "&tls_cert=/etc/ssl/db/client%20cert.pem&tls_key=%2Fetc%2Fssl%2Fdb%2Fclient-key.pem");
    EXPECT_EQ(o.tls.mode, MysqlTlsMode::VerifyIdentity);
    EXPECT_EQ(o.tls.ca_file, "/etc/ssl/db/ca.pem");
    EXPECT_EQ(o.tls.cert_file, "/etc/ssl/db/client cert.pem");  // percent-decoded
    EXPECT_EQ(o.tls.key_file, "/etc/ssl/db/client-key.pem");
    EXPECT_EQ(o.pool_size, 4u);
}

TEST(MysqlUrl, AnUnknownTlsModeErrorListsTheModesAndNotThePassword) {
    try {
        parse_mysql_url("mysql://app:hunter2@db/shop?tls=yes");
        FAIL() << "tls=yes was accepted";
    } catch (const ConfigError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("verify_identity"), std::string::npos) << what;
        EXPECT_EQ(what.find("hunter2"), std::string::npos) << what;
    }
}

TEST(MysqlUrl, RoundTripsThroughToUrl) {
    MysqlOptions defaults;
    defaults.database = "lockstep";
    MysqlOptions full;
    full.host = "fe80::7";
    full.port = 3399;
    full.user = "app user";
    full.password = "p@ss:w/o%rd?&=#";
    full.database = "shop_1";
    full.connect_timeout = 1ms;
    full.read_timeout = 24h;
    full.write_timeout = 90s;
    full.pool_size = 10000;
    full.pool_wait_timeout = 0ms;
    full.validation_interval = 0ms;
    full.statement_cache_size = 7;
    full.tls = {.mode = MysqlTlsMode::VerifyIdentity,
                .ca_file = "/etc/ssl/db ca/ca.pem",
                .cert_file = "/etc/ssl/client&cert=1.pem",
                .key_file = "/etc/ssl/client%key.pem"};
    MysqlOptions required;
    required.database = "x";
    required.tls.mode = MysqlTlsMode::Required;
    MysqlOptions no_password;
    no_password.user = "reader";
    no_password.database = "x";
    for (const MysqlOptions& o : {defaults, full, required, no_password}) {
        SCOPED_TRACE(to_url(o));
        expect_same(parse_mysql_url(to_url(o)), o);
    }
}

// ---------------------------------------------------------------------------------------------
// Durations

TEST(Duration, UnitsAndBareMilliseconds) {
    EXPECT_EQ(parse_duration("250ms", "d"), 250ms);
    EXPECT_EQ(parse_duration("2s", "d"), 2s);
    EXPECT_EQ(parse_duration("3m", "d"), 3min);
    EXPECT_EQ(parse_duration("1500", "d"), 1500ms);
    EXPECT_EQ(parse_duration("0", "d"), 0ms);
    EXPECT_EQ(parse_duration("1440m", "d"), 24h);  // a day is the longest accepted
    EXPECT_EQ(parse_duration("86400s", "d"), 24h);
}

TEST(Duration, FractionsThatAreWholeMilliseconds) {
    EXPECT_EQ(parse_duration("1.5s", "d"), 1500ms);
    EXPECT_EQ(parse_duration("0.25m", "d"), 15s);
    EXPECT_EQ(parse_duration("2.000s", "d"), 2s);
    EXPECT_EQ(parse_duration("0.001s", "d"), 1ms);
    EXPECT_EQ(parse_duration("250.0ms", "d"), 250ms);
}

TEST(Duration, ErrorsNameTheCallersPart) {
    for (const char* bad :
         {"", "s", "1h", "1.5ms", "1.5", "-5", "86401s", "1441m", "86400001", "5 s", "5S", "1ms2", "1.s", ".5s",
          "1..5s", "1.5.2s", "0.0001s", "1e3ms", "1,5s", "1.0000000001s", "86400.001s", "1440.5m", "-1.5s",
          "1.5 s", "0x10ms", "99999999999999999999ms"}) {
        SCOPED_TRACE(bad);
        try {
            parse_duration(bad, "option 'lease'");
            ADD_FAILURE() << "accepted";
        } catch (const ConfigError& e) {
            EXPECT_EQ(e.part(), "option 'lease'");
        }
    }
}

}  // namespace
}  // namespace lockstep
