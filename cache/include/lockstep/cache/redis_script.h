// A Lua script run with EVALSHA. The SHA-1 is computed locally, so the first call costs one
// round trip when the server already knows the script; on NOSCRIPT (after SCRIPT FLUSH or a
// server restart) the client loads it and retries once, transparently.
//
// Scripts are values: define them once (e.g. a function-local static) and share them.
#pragma once

#include <string>

namespace lockstep {

class RedisScript {
public:
    explicit RedisScript(std::string source);
    const std::string& source() const noexcept { return source_; }
    // Lowercase hex SHA-1 of the source, as SCRIPT LOAD returns it.
    const std::string& sha1() const noexcept { return sha1_; }

private:
    std::string source_;
    std::string sha1_;
};

// Lowercase hex SHA-1 of `bytes` (OpenSSL's libcrypto; used for script digests).
std::string sha1_hex(const std::string& bytes);

}  // namespace lockstep
