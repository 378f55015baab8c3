// Script digests. EVALSHA needs the lowercase hex SHA-1 that SCRIPT LOAD returns; computing it
// here (OpenSSL's libcrypto, a maintained implementation) lets the first call of a script go out
// as EVALSHA, inside a pipeline, without a round trip per node to learn it. RedisClient checks
// the digest SCRIPT LOAD returns against this one on every load (redis_client.cpp), on every
// node of a cluster, so a mismatch would be a ProtocolError, never a wrong script.
#include "lockstep/cache/redis_script.h"

#include <openssl/evp.h>

#include <cstdio>

#include "lockstep/core/error.h"

namespace lockstep {

RedisScript::RedisScript(std::string source) : source_(std::move(source)), sha1_(sha1_hex(source_)) {}

std::string sha1_hex(const std::string& bytes) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    if (EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha1(), nullptr) != 1 || size != 20) {
        throw ProtocolError("SHA-1 of a Redis script failed (OpenSSL EVP_Digest)");
    }
    std::string hex;
    hex.reserve(2 * size);
    for (unsigned int i = 0; i < size; ++i) {
        char b[3];
        std::snprintf(b, sizeof b, "%02x", digest[i]);
        hex += b;
    }
    return hex;
}

}  // namespace lockstep
