// BinlogStream over libmariadb's replication API. Only the framing comes from the connector
// (mariadb_rpl_fetch hands out each event's raw bytes); every event is decoded by
// binlog_event.cpp, never by mariadb_rpl_extract_rows.
#include "lockstep/invalidation/binlog_stream.h"

#include <mysql.h>
#include <ma_pvio.h>
#include <mariadb_rpl.h>
#include <poll.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "lockstep/db/mysql_tls.h"
#include "lockstep/invalidation/binlog_event.h"

namespace lockstep {

namespace {

constexpr unsigned kErrorPositionLost = 1236;  // ER_MASTER_FATAL_ERROR_READING_BINLOG

// What a connection's pvio->ctls points to: ma_tls.h's st_ma_pvio_tls (Connector/C 3.x), which
// ma_pvio.h leaves as void outside the connector's own build (without HAVE_TLS).
struct ConnectorTls {
    void* data;
    MARIADB_PVIO* pvio;
    void* ssl;  // SSL* with OpenSSL
};

// Whether libmariadb's TLS is OpenSSL's (then a connection's MARIADB_TLS::ssl is an SSL*).
bool openssl_tls(MYSQL* m) noexcept {
    const char* library = nullptr;
    if (mariadb_get_infov(m, MARIADB_TLS_LIBRARY, &library) != 0 || !library) return false;
    return std::string_view(library).rfind("OpenSSL", 0) == 0;
}

unsigned seconds_at_least_one(std::chrono::milliseconds ms) {
    auto s = std::chrono::ceil<std::chrono::seconds>(ms).count();
    return static_cast<unsigned>(s < 1 ? 1 : s);
}

// The options' TLS, as the pool sets it through Connector/C++ (db/src/connector.cpp): a CA file
// makes libmariadb verify the chain, VERIFY_SERVER_CERT adds the host name, ENFORCE asks for TLS
// (but does not refuse a server without it: connect() checks that).
void set_tls(MYSQL* m, const MysqlTlsOptions& tls) {
    if (tls.mode == MysqlTlsMode::Disabled) return;
    my_bool enforce = 1;
    my_bool verify_host = tls.mode == MysqlTlsMode::VerifyIdentity ? 1 : 0;
    mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &enforce);
    mysql_optionsv(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify_host);
    if (!tls.ca_file.empty()) mysql_optionsv(m, MYSQL_OPT_SSL_CA, tls.ca_file.c_str());
    if (!tls.cert_file.empty()) mysql_optionsv(m, MYSQL_OPT_SSL_CERT, tls.cert_file.c_str());
    if (!tls.key_file.empty()) mysql_optionsv(m, MYSQL_OPT_SSL_KEY, tls.key_file.c_str());
}

// A client connection with the options' timeouts and TLS. Caller owns the handle.
MYSQL* connect(const MysqlOptions& o, std::chrono::milliseconds read_timeout) {
    check_mysql_tls(o.tls);
    MYSQL* m = mysql_init(nullptr);
    if (!m) throw ConnectionError("binlog: mysql_init failed");
    unsigned connect_s = seconds_at_least_one(o.connect_timeout), read_s = seconds_at_least_one(read_timeout);
    mysql_optionsv(m, MYSQL_OPT_CONNECT_TIMEOUT, &connect_s);
    mysql_optionsv(m, MYSQL_OPT_READ_TIMEOUT, &read_s);
    mysql_optionsv(m, MYSQL_OPT_WRITE_TIMEOUT, &read_s);
    set_tls(m, o.tls);
    if (!mysql_real_connect(m, o.host.c_str(), o.user.c_str(), o.password.c_str(), nullptr,
                            static_cast<unsigned>(o.port), nullptr, 0)) {
        std::string what = "binlog: connect to " + o.host + ":" + std::to_string(o.port) + " failed: " + mysql_error(m);
        mysql_close(m);
        throw ConnectionError(what);
    }
    // libmariadb falls back to plain text when the server offers no TLS, unless it also checks
    // the host name (verify_identity): the client's own view decides.
    if (o.tls.mode != MysqlTlsMode::Disabled && !mysql_get_ssl_cipher(m)) {
        mysql_close(m);
        throw ConnectionError("binlog: connect to " + o.host + ":" + std::to_string(o.port) +
                              " failed: TLS/SSL error: the server did not negotiate TLS (tls=" +
                              std::string(to_string(o.tls.mode)) + ")");
    }
    return m;
}

void run(MYSQL* m, const std::string& sql) {
    if (mysql_real_query(m, sql.data(), sql.size()) != 0) {
        throw ConnectionError("binlog: `" + sql + "` failed: " + mysql_error(m));
    }
    if (MYSQL_RES* r = mysql_store_result(m)) mysql_free_result(r);
}

std::string query_string(MYSQL* m, const std::string& sql) {
    if (mysql_real_query(m, sql.data(), sql.size()) != 0) {
        throw ConnectionError("binlog: `" + sql + "` failed: " + mysql_error(m));
    }
    MYSQL_RES* r = mysql_store_result(m);
    std::string out;
    if (r) {
        if (MYSQL_ROW row = mysql_fetch_row(r); row && row[0]) out = row[0];
        mysql_free_result(r);
    }
    return out;
}

std::string quoted(MYSQL* m, const std::string& s) {
    std::string out(s.size() * 2 + 1, '\0');
    out.resize(mysql_real_escape_string(m, out.data(), s.data(), static_cast<unsigned long>(s.size())));
    return "'" + out + "'";
}

// What the server sends before and while it looks for the start position: the fake ROTATE, the
// FORMAT_DESCRIPTION, the GTID_LIST and BINLOG_CHECKPOINT of each file it reads. Anything else
// (a GTID, a heartbeat) means the seek is over.
bool sent_while_seeking(const BinlogEventBytes& event) noexcept {
    if (event.bytes.size() < binlog::kHeaderSize) return false;
    const std::uint8_t type = event.bytes[4];
    return type == binlog::EventType::Rotate || type == binlog::EventType::FormatDescription ||
           type == binlog::EventType::GtidList || type == binlog::EventType::BinlogCheckpoint;
}

}  // namespace

struct BinlogStream::Impl {
    BinlogStreamOptions options;
    MYSQL* mysql = nullptr;
    MARIADB_RPL* rpl = nullptr;
    bool checksum = false;
    // From the dump request until the first event past the start position (see the header).
    bool seeking = false;
    std::chrono::steady_clock::time_point seek_started{}, seek_deadline{};
    std::optional<std::chrono::microseconds> seek_took;  // at the first event past the start
    MYSQL* asker = nullptr;  // the second connection that asks whether the dump still runs

    // Whether bytes of the next event are here, or arrive within `timeout` (readable or hung up:
    // either way next() returns, or throws, without waiting). Empty when that cannot be known.
    std::optional<bool> next_bytes_within(std::chrono::milliseconds timeout) const noexcept {
        if (!rpl || !mysql) return false;
        // The connector reads ahead into its pvio cache (ma_pvio_cache_read): bytes left there are
        // the next packet, or its start. Not compressed here, so NET itself keeps nothing back.
        const MARIADB_PVIO* pvio = mysql->net.pvio;
        if (!pvio) return false;
        if (pvio->cache && pvio->cache_pos < pvio->cache + pvio->cache_size) return true;
        if (pvio->ctls) {
            // Over TLS, records already decrypted wait inside OpenSSL (ctls->ssl is its SSL*,
            // when libmariadb was built with it); bytes on the socket are further records. With
            // another TLS library the answer is unknown.
            const auto* tls = static_cast<const ConnectorTls*>(pvio->ctls);
            if (!openssl_tls(mysql) || !tls->ssl) return std::nullopt;
            if (SSL_pending(static_cast<const SSL*>(tls->ssl)) > 0) return true;
        }
        pollfd p{};
        p.fd = mysql_get_socket(mysql);
        p.events = POLLIN;
        return ::poll(&p, 1, static_cast<int>(timeout.count())) > 0 && p.revents != 0;
    }

    // Whether the server answers, within read_timeout, that this stream's connection is still
    // there (its thread runs the dump, or is about to). A connection the server ended instead
    // shows as a hang-up on the socket, which next() reports. Throws ConnectionError when the
    // server does not answer.
    bool dump_running() {
        if (!asker) {
            MysqlOptions o = options.mysql;
            o.connect_timeout = std::min(o.connect_timeout, options.read_timeout);
            asker = connect(o, options.read_timeout);
        }
        return query_string(asker, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = " +
                                       std::to_string(mysql_thread_id(mysql))) == "1";
    }

    // Before a read during the seek: silence is waited through while the server says the dump
    // runs, up to seek_timeout.
    void wait_through_seek() {
        // Unknown (TLS through another library than OpenSSL): the connector's read timeout decides.
        while (!next_bytes_within(options.read_timeout).value_or(true)) {
            if (std::chrono::steady_clock::now() >= seek_deadline) {
                throw ConnectionError("binlog: the server sent nothing past the start position within seek_timeout (" +
                                      std::to_string(options.seek_timeout.count()) + " ms)");
            }
            if (!dump_running()) throw ConnectionError("binlog: the server no longer has this stream's connection");
        }
    }

    void end_seek() noexcept {
        seeking = false;
        if (asker) {
            mysql_close(asker);
            asker = nullptr;
        }
    }
};

BinlogStream::BinlogStream(BinlogStreamOptions options) : impl_(std::make_unique<Impl>()) {
    impl_->options = std::move(options);
}

BinlogStream::~BinlogStream() { close(); }

bool BinlogStream::is_open() const noexcept { return impl_->rpl != nullptr; }

void BinlogStream::open() {
    close();
    auto& o = impl_->options;
    impl_->mysql = connect(o.mysql, o.read_timeout);
    try {
        MYSQL* m = impl_->mysql;
        // Declare checksum awareness with the server's own algorithm: events then arrive exactly
        // as logged (CRC32 by default) and we verify them.
        std::string alg = query_string(m, "SELECT @@global.binlog_checksum");
        impl_->checksum = alg != "NONE";
        run(m, "SET @master_binlog_checksum = " + quoted(m, alg));
        run(m, "SET @mariadb_slave_capability = 4");  // MARIA_SLAVE_CAPABILITY_GTID
        run(m, "SET @slave_connect_state = " + quoted(m, o.start_gtid));
        run(m, "SET @slave_gtid_strict_mode = 0");
        run(m, "SET @slave_gtid_ignore_duplicates = 0");
        auto heartbeat_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(o.heartbeat).count();
        run(m, "SET @master_heartbeat_period = " + std::to_string(heartbeat_ns));
        impl_->rpl = mariadb_rpl_init(m);
        if (!impl_->rpl) throw ConnectionError("binlog: mariadb_rpl_init failed");
        mariadb_rpl_optionsv(impl_->rpl, MARIADB_RPL_SERVER_ID, static_cast<unsigned>(o.server_id));
        mariadb_rpl_optionsv(impl_->rpl, MARIADB_RPL_START, 4UL);
        if (mariadb_rpl_open(impl_->rpl) != 0) {
            throw ConnectionError(std::string("binlog: dump request failed: ") + mysql_error(m));
        }
        impl_->seeking = true;
        impl_->seek_took.reset();
        impl_->seek_started = std::chrono::steady_clock::now();
        impl_->seek_deadline = impl_->seek_started + o.seek_timeout;
    } catch (...) {
        close();
        throw;
    }
}

BinlogEventBytes BinlogStream::next() {
    if (!impl_->rpl) throw ConnectionError("binlog: stream not open");
    if (impl_->seeking) {
        try {
            impl_->wait_through_seek();
        } catch (const Error&) {
            close();
            throw;
        }
    }
    // A fresh event each time, freed here: on some failures the connector frees the event it was
    // given and on others it does not, so reusing one would risk a double free.
    MARIADB_RPL_EVENT* ev = mariadb_rpl_fetch(impl_->rpl, nullptr);
    if (!ev) {
        unsigned code = mysql_errno(impl_->mysql);
        std::string what = std::string("binlog: read failed (") + std::to_string(code) + "): " + mysql_error(impl_->mysql);
        close();
        if (code == kErrorPositionLost) throw BinlogPositionLostError(what);
        throw ConnectionError(what);
    }
    std::unique_ptr<MARIADB_RPL_EVENT, void (*)(MARIADB_RPL_EVENT*)> owned(ev, mariadb_free_rpl_event);
    // raw_data is the network packet: one OK byte (0x00), then the event as logged.
    if (ev->raw_data_size < 1 + binlog::kHeaderSize) throw BinlogDecodeError("binlog: short event packet");
    binlog::Bytes event(ev->raw_data + 1, ev->raw_data_size - 1);
    // The fake ROTATE and heartbeats the server makes up carry a checksum too when it is on.
    binlog::Bytes body = binlog::strip_checksum(event, impl_->checksum);
    BinlogEventBytes out{std::vector<std::uint8_t>(body.begin(), body.end())};
    if (impl_->seeking && !sent_while_seeking(out)) {
        impl_->seek_took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                                  impl_->seek_started);
        impl_->end_seek();
    }
    return out;
}

std::optional<std::chrono::microseconds> BinlogStream::seek_time() const noexcept { return impl_->seek_took; }

bool BinlogStream::has_buffered_event() const noexcept {
    // Unknown: false, and the follower flushes per group.
    return impl_->next_bytes_within(std::chrono::milliseconds(0)).value_or(false);
}

void BinlogStream::close() noexcept {
    impl_->end_seek();
    if (impl_->rpl) {
        mariadb_rpl_close(impl_->rpl);
        impl_->rpl = nullptr;
    }
    if (impl_->mysql) {
        mysql_close(impl_->mysql);
        impl_->mysql = nullptr;
    }
}

std::string BinlogStream::current_gtid(const MysqlOptions& mysql) {
    MYSQL* m = connect(mysql, mysql.read_timeout);
    try {
        std::string pos = query_string(m, "SELECT @@global.gtid_binlog_pos");
        mysql_close(m);
        return pos;
    } catch (...) {
        mysql_close(m);
        throw;
    }
}

}  // namespace lockstep
