// Fuzzes Redis reply handling (cache/redis_reply, cache/src/hiredis_io): bytes as a server (or
// anything listening on its port) might send them, through hiredis's reader — what
// RedisConnection and RedisSubscriber do with the socket's bytes — then converted with
// detail::to_reply and read with every accessor. A wrong-type access must be a lockstep::Error,
// never a crash; a protocol error from the reader ends the stream, as it ends the connection.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "hiredis_io.h"
#include "lockstep/cache/redis_reply.h"
#include "lockstep/core/error.h"

namespace {

struct ReaderDeleter {
    void operator()(redisReader* r) const noexcept { redisReaderFree(r); }
};

void visit(const lockstep::RedisReply& r, int depth) {
    if (depth > 64) return;
    (void)r.type_name();
    try { (void)r.str(); } catch (const lockstep::Error&) {}
    try { (void)r.integer(); } catch (const lockstep::Error&) {}
    try { (void)r.optional_string(); } catch (const lockstep::Error&) {}
    try { (void)r.optional_integer(); } catch (const lockstep::Error&) {}
    try { (void)r.error_message(); } catch (const lockstep::Error&) {}
    try { (void)r.throw_if_error(); } catch (const lockstep::Error&) {}
    try {
        for (const auto& e : r.elements()) visit(e, depth + 1);
    } catch (const lockstep::Error&) {
    }
}

}  // namespace

// hiredis 0.14's reader allocates an aggregate's element table when it reads the header
// (calloc(n, 8) for "*<n>"), before any element arrives; libFuzzer reports a declared count of
// hundreds of millions as out-of-memory. The connection then waits for elements that never come
// and ends at its socket timeout. Inputs declaring more than 9,999,999 elements are left out here.
static bool declares_a_huge_aggregate(const char* bytes, std::size_t size) {
    std::size_t digits = 0;
    bool after_star = false;
    for (std::size_t i = 0; i < size; ++i) {
        const char c = bytes[i];
        if (after_star && c >= '0' && c <= '9') {
            if (++digits > 7) return true;
            continue;
        }
        after_star = c == '*';
        digits = 0;
    }
    return false;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (declares_a_huge_aggregate(reinterpret_cast<const char*>(data), size)) return 0;
    std::unique_ptr<redisReader, ReaderDeleter> reader(redisReaderCreate());
    if (!reader) return 0;
    // Fed in two pieces, as a socket may deliver it: the reader must resume mid-reply.
    const std::size_t half = size / 2;
    const char* bytes = reinterpret_cast<const char*>(data);
    for (const auto& [from, len] : {std::pair{std::size_t{0}, half}, std::pair{half, size - half}}) {
        if (len > 0 && redisReaderFeed(reader.get(), bytes + from, len) != REDIS_OK) return 0;
        for (;;) {
            void* raw = nullptr;
            if (redisReaderGetReply(reader.get(), &raw) != REDIS_OK) return 0;  // protocol error
            if (raw == nullptr) break;                                         // needs more bytes
            lockstep::detail::ReplyPtr reply(static_cast<redisReply*>(raw));
            visit(lockstep::detail::to_reply(*reply), 0);
        }
    }
    return 0;
}
