// RedisReply accessors and the local SHA-1: pure unit tests, no server.
#include "lockstep/cache/redis_reply.h"

#include <gtest/gtest.h>

#include <string>

#include "lockstep/cache/redis_script.h"
#include "lockstep/core/error.h"

namespace lockstep {
namespace {

TEST(RedisReplyTest, DefaultReplyIsNilAndReadsAsEmptyOptionals) {
    RedisReply r;
    EXPECT_TRUE(r.is_nil());
    EXPECT_EQ(r.optional_string(), std::nullopt);
    EXPECT_EQ(r.optional_integer(), std::nullopt);
}

TEST(RedisReplyTest, StringsKeepEmbeddedNulBytes) {
    const std::string bytes("a\0b\0", 4);
    RedisReply r = RedisReply::string(bytes);
    EXPECT_EQ(r.str(), bytes);
    EXPECT_EQ(r.optional_string(), bytes);
}

TEST(RedisReplyTest, WrongTypeAccessThrowsProtocolErrorNamingBothTypes) {
    RedisReply s = RedisReply::status("OK");
    try {
        (void)s.integer();
        FAIL() << "no exception";
    } catch (const ProtocolError& e) {
        EXPECT_NE(std::string(e.what()).find("Integer"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("Status"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)RedisReply::integer(1).str(), ProtocolError);
    EXPECT_THROW((void)RedisReply::integer(1).elements(), ProtocolError);
    EXPECT_THROW((void)RedisReply::integer(1).optional_string(), ProtocolError);
    EXPECT_THROW((void)RedisReply::string("x").optional_integer(), ProtocolError);
    EXPECT_THROW((void)RedisReply::status("OK").optional_string(), ProtocolError);  // a status is not a value
    EXPECT_THROW((void)RedisReply::nil().error_message(), ProtocolError);
}

TEST(RedisReplyTest, ErrorRepliesThrowOnlyWhenAsked) {
    RedisReply e = RedisReply::error("WRONGTYPE Operation against a key holding the wrong kind of value");
    EXPECT_TRUE(e.is_error());
    EXPECT_EQ(e.error_message().rfind("WRONGTYPE", 0), 0u);
    EXPECT_THROW(e.throw_if_error(), ProtocolError);
    EXPECT_NO_THROW(RedisReply::integer(3).throw_if_error());
}

TEST(RedisReplyTest, ArraysNest) {
    RedisReply r =
        RedisReply::array({RedisReply::integer(1), RedisReply::array({RedisReply::string("x")}), {}});
    ASSERT_EQ(r.elements().size(), 3u);
    EXPECT_EQ(r.elements()[1].elements()[0].str(), "x");
    EXPECT_TRUE(r.elements()[2].is_nil());
    EXPECT_EQ(r.type_name(), "Array");
}

TEST(Sha1Test, MatchesTheStandardTestVectors) {
    EXPECT_EQ(sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    EXPECT_EQ(sha1_hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
    EXPECT_EQ(sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    EXPECT_EQ(sha1_hex(std::string(1000000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

TEST(Sha1Test, ScriptCarriesTheDigestOfItsSource) {
    RedisScript script("return 1");
    EXPECT_EQ(script.sha1(), sha1_hex("return 1"));
    EXPECT_EQ(script.source(), "return 1");
}

}  // namespace
}  // namespace lockstep
