// BinlogStream: one replica connection to MariaDB that hands out binary-log events as bytes.
//
//   BinlogStream stream({.mysql = opts, .server_id = 4242, .start_gtid = "0-1-17"});
//   stream.open();
//   while (auto ev = stream.next()) { ... ev->bytes ... }   // header + body, checksum verified
//
// It speaks the replication protocol through libmariadb (mariadb_rpl.h) and does what a real
// replica does before COM_BINLOG_DUMP: declares checksum awareness (@master_binlog_checksum,
// which must be set before opening), the GTID capability (@mariadb_slave_capability=4), the
// position (@slave_connect_state: events after that GTID state) and a heartbeat period
// (@master_heartbeat_period). With a heartbeat the server sends something at least every
// `heartbeat`, so a read timeout of a few heartbeats tells a dead or paused (SIGSTOP) server from
// a quiet one: next() then throws ConnectionError instead of blocking forever.
//
// Except while the server looks for the start position: it reads its binlog file from the start
// of the file up to that GTID and sends nothing meanwhile, no heartbeat either, for a time that
// grows with the file (1.5 s for a 363 MB file on a loaded 2-core machine; the default
// max_binlog_size is 1 GB). A stream silent for a whole `read_timeout` right after its dump
// request asks the server on a second connection whether its dump is still running: a server
// that answers within `read_timeout` and still runs the dump is seeking, not dead, and the
// stream waits on, up to `seek_timeout`. A dead, paused or cut-off server does not answer, and
// next() throws ConnectionError after read_timeout as before. (Without that question a follower
// whose seek outlasts read_timeout reconnects forever, each reconnect starting a new seek.)
//
// Every follower needs its own server_id: the server evicts an older dump connection that
// registers with the same id.
//
// Errors: ConnectionError (connect failed, connection lost, read timeout: reconnect from the
// last applied position), BinlogPositionLostError (the server no longer has the binlogs after
// the requested position: they were purged; only a full flush of the affected keys is safe).
//
// Thread safety: one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/core/mysql_options.h"
#include "lockstep/invalidation/binlog_errors.h"

namespace lockstep {

// The server no longer holds the binlog after the requested position (MariaDB error 1236).
class BinlogPositionLostError : public ConnectionError {
public:
    using ConnectionError::ConnectionError;
    Recovery recovery() const noexcept override { return Recovery::GiveUp; }
};

struct BinlogStreamOptions {
    MysqlOptions mysql;
    // This follower's replica id; distinct from the server's and from every other follower's.
    std::uint32_t server_id = 4242;
    // Start after this GTID state ("0-1-17", several domains comma-separated). Empty: from the
    // beginning of the oldest binlog the server still has.
    std::string start_gtid;
    // The server sends a heartbeat event when it has had nothing to send for this long.
    std::chrono::milliseconds heartbeat{500};
    // A read that waits longer than this fails (ConnectionError): about three heartbeats.
    std::chrono::milliseconds read_timeout{1500};
    // How long the server may look for the start position while it answers that its dump runs
    // (see the top of this header); then next() throws ConnectionError.
    std::chrono::milliseconds seek_timeout{60000};
};

struct BinlogEventBytes {
    std::vector<std::uint8_t> bytes;  // header + body, checksum stripped and verified
};

class BinlogStream {
public:
    explicit BinlogStream(BinlogStreamOptions options);
    ~BinlogStream();
    BinlogStream(const BinlogStream&) = delete;
    BinlogStream& operator=(const BinlogStream&) = delete;

    // Connects and starts the dump. Throws ConnectionError.
    void open();
    // The next event (heartbeats included). Throws ConnectionError, BinlogPositionLostError,
    // BinlogDecodeError (checksum).
    BinlogEventBytes next();
    // True when next() would return without waiting for the network: the bytes of the next
    // event (or its start) were already received, in the connector's read-ahead cache, OpenSSL's
    // decrypted records (TLS) or the socket. The follower flushes its buffered groups when this
    // turns false. False when unknown (TLS through a library other than OpenSSL): the caller then
    // flushes early, which costs a round trip, never an invalidation.
    bool has_buffered_event() const noexcept;
    // How long the server sought the start position at the last open(): the dump request to the
    // first event past it. Empty until that event arrives.
    std::optional<std::chrono::microseconds> seek_time() const noexcept;
    void close() noexcept;
    bool is_open() const noexcept;

    // The server's current binlog GTID state (@@global.gtid_binlog_pos) on a fresh connection.
    static std::string current_gtid(const MysqlOptions& mysql);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
