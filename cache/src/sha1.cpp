// SHA-1 (FIPS 180-4), only for script digests: EVALSHA needs the same lowercase hex digest that
// SCRIPT LOAD returns, and computing it locally saves a round trip on the first call. Not for
// anything security-related.
#include <array>
#include <cstdint>
#include <cstdio>
#include <string>

#include "lockstep/cache/redis_script.h"

namespace lockstep {

namespace {

std::uint32_t rotl(std::uint32_t x, int n) {
    return (x << n) | (x >> (32 - n));
}

void process_block(std::array<std::uint32_t, 5>& h, const unsigned char* block) {
    std::uint32_t w[80];
    for (int i = 0; i < 16; ++i) {
        w[i] = (std::uint32_t{block[4 * i]} << 24) | (std::uint32_t{block[4 * i + 1]} << 16) |
               (std::uint32_t{block[4 * i + 2]} << 8) | std::uint32_t{block[4 * i + 3]};
    }
    for (int i = 16; i < 80; ++i) w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);

    std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; ++i) {
        std::uint32_t f, k;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5A827999;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ED9EBA1;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8F1BBCDC;
        } else {
            f = b ^ c ^ d;
            k = 0xCA62C1D6;
        }
        const std::uint32_t t = rotl(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rotl(b, 30);
        b = a;
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

}  // namespace

std::string sha1_hex(const std::string& bytes) {
    std::array<std::uint32_t, 5> h{0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
    const std::size_t size = bytes.size();

    std::size_t offset = 0;
    for (; offset + 64 <= size; offset += 64) process_block(h, data + offset);

    // Padding: 0x80, zeros, then the message length in bits as a big-endian 64-bit number.
    unsigned char tail[128] = {};
    const std::size_t rest = size - offset;
    for (std::size_t i = 0; i < rest; ++i) tail[i] = data[offset + i];
    tail[rest] = 0x80;
    const std::size_t tail_size = rest + 1 + 8 <= 64 ? 64 : 128;
    const std::uint64_t bits = static_cast<std::uint64_t>(size) * 8;
    for (int i = 0; i < 8; ++i) tail[tail_size - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
    process_block(h, tail);
    if (tail_size == 128) process_block(h, tail + 64);

    std::string hex;
    hex.reserve(40);
    for (std::uint32_t word : h) {
        char buf[9];
        std::snprintf(buf, sizeof buf, "%08x", word);
        hex.append(buf);
    }
    return hex;
}

}  // namespace lockstep
