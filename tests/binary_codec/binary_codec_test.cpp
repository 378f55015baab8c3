// BinaryCodec<T> (strategies/binary_codec.h): round trips of every supported field type, and
// every kind of malformed payload is a typed ProtocolError (the repository's "miss"), never a
// crash, a hang or a huge allocation. Logic only, no servers.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/strategies/binary_codec.h"

namespace lockstep {
namespace {

enum class Color : std::uint8_t { Red = 1, Blue = 200 };

struct Item {
    std::int64_t id = 0;
    std::string name;
    std::int32_t delta = 0;
    std::uint16_t small = 0;
    bool flag = false;
    double price = 0;
    Color color = Color::Red;
    std::optional<std::string> note;
    std::vector<std::int64_t> tags;
    bool operator==(const Item&) const = default;
};

template <class Fields>
void lockstep_binary_fields(Fields& f, Item& i) {
    f(i.id, i.name, i.delta, i.small, i.flag, i.price, i.color, i.note, i.tags);
}

Item sample() {
    return Item{std::numeric_limits<std::int64_t>::min(),
                std::string("bin\0ary\xff", 8),
                -1,
                65535,
                true,
                -0.125,
                Color::Blue,
                std::string("n"),
                {0, -1, std::numeric_limits<std::int64_t>::max()}};
}

TEST(BinaryCodecTest, RoundTripsEveryFieldType) {
    BinaryCodec<Item> codec;
    const Item a = sample();
    EXPECT_EQ(codec.decode(codec.encode(a)), a);
    const Item empty{};
    EXPECT_EQ(codec.decode(codec.encode(empty)), empty);
}

TEST(BinaryCodecTest, IsCompact) {
    BinaryCodec<Item> codec;
    Item i;
    i.id = 5;
    i.name = "abcdefgh";
    // Header 2; id 1, name 1 + 8, delta 1, small 1, flag 1, price 8, color 2 (200, unsigned
    // varint), note 1, tags 1.
    EXPECT_LE(codec.encode(i).size(), 2u + 1 + 9 + 1 + 1 + 1 + 8 + 2 + 1 + 1);
}

TEST(BinaryCodecTest, EveryTruncationIsAProtocolError) {
    BinaryCodec<Item> codec;
    const std::string bytes = codec.encode(sample());
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        EXPECT_THROW(codec.decode(std::string_view(bytes).substr(0, n)), ProtocolError) << "length " << n;
    }
}

TEST(BinaryCodecTest, TrailingBytesWrongTagOrVersionAreErrors) {
    BinaryCodec<Item> codec;
    std::string bytes = codec.encode(sample());
    EXPECT_THROW(codec.decode(bytes + "x"), ProtocolError);
    std::string tag = bytes;
    tag[0] = '{';  // a JSON entry read by a binary repository: a miss
    EXPECT_THROW(codec.decode(tag), ProtocolError);
    // Another format version (the field list changed): old entries become misses.
    BinaryCodec<Item> v2(2);
    EXPECT_THROW(v2.decode(bytes), ProtocolError);
    EXPECT_EQ(v2.decode(v2.encode(sample())), sample());
}

TEST(BinaryCodecTest, HostileLengthsAndValuesAreErrors) {
    BinaryCodec<Item> codec;
    const std::string head("B\x01", 2);
    // id = 0, then a name claiming 2^62 bytes.
    EXPECT_THROW(codec.decode(head + std::string("\x00\x80\x80\x80\x80\x80\x80\x80\x80\x40", 10)), ProtocolError);
    // A varint running past 10 bytes.
    EXPECT_THROW(codec.decode(head + std::string(11, '\xff')), ProtocolError);
    // delta (int32) out of range: zigzag of 2^40.
    std::string big = head + std::string("\x00\x00", 2);  // id 0, name ""
    big += std::string("\x80\x80\x80\x80\x80\x40", 6);    // 2^41 zigzag = 2^40
    EXPECT_THROW(codec.decode(big), ProtocolError);
    // A bool that is 2.
    std::string b = head + std::string("\x00\x00\x00\x00\x02", 5);
    EXPECT_THROW(codec.decode(b), ProtocolError);
    // A vector count far beyond the bytes left: refused before reserving.
    BinaryCodec<Item> c;
    std::string v = c.encode(Item{});
    v.pop_back();
    v += std::string("\xff\xff\xff\xff\x0f", 5);
    EXPECT_THROW(c.decode(v), ProtocolError);
}

}  // namespace
}  // namespace lockstep
