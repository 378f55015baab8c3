// BinaryCodec<T>: a compact binary payload for cache entries, for entities whose cache hit
// must cost little more than the GET. JsonCodec (codec.h) stays the default
// and stays available: entries in JSON are readable with redis-cli, these are not.
//
// Why a binary form and not a SAX parse into T: a SAX parse still scans text character by
// character and converts decimal numbers; this form is a length-prefixed copy and a few varints
// (a field list read once, no DOM, no allocation but T's own strings), so decoding an 80-byte
// entity costs tens of nanoseconds where a round trip costs tens of microseconds.
//
// Opt in per repository, through the entity it is built with:
//
//   struct Product { std::int64_t id; std::string name; std::int64_t price; int stock; };
//   // Found by ADL. One function serves both directions: list the fields, in a fixed order.
//   template <class Fields> void lockstep_binary_fields(Fields& f, Product& p) {
//       f(p.id, p.name, p.price, p.stock);
//   }
//   Entity<Product> e = ...;
//   e.codec = std::make_shared<BinaryCodec<Product>>();   // unset: JsonCodec<Product>
//
// Format (all of it the cache entry's payload; the envelope with the row version is around it,
// cache_entry.h):
//
//   byte 0       format tag 'B' then the format version (kBinaryFormatVersion), two bytes
//   then         each field in the order listed:
//                  integers and enums   zigzag LEB128 varint (signed) or LEB128 (unsigned)
//                  bool                 one byte, 0 or 1
//                  float / double       IEEE-754, little-endian, 4 / 8 bytes
//                  std::string          varint length, then the bytes (any bytes: binary-safe)
//                  std::optional<X>     one byte 0 (empty) or 1 followed by X
//                  std::vector<X>       varint count, then each X
//   nothing after the last field.
//
// Changing the field list (adding, removing, reordering, changing a type) changes the meaning
// of old entries: bump `format_version` in the constructor (or the key prefix) when you do, so
// that old entries fail to decode and become misses (the repository deletes and reloads them),
// rather than decode into the wrong fields. Any malformed payload (wrong tag or version,
// truncated, a varint past 64 bits, an integer out of its field's range, a length past the end, a bool that is not 0/1, trailing bytes)
// throws lockstep::ProtocolError: the repository treats it as a miss, never a crash.
//
// Thread safety: stateless after construction; encode/decode are safe to call concurrently.
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/strategies/codec.h"

namespace lockstep {

inline constexpr std::uint8_t kBinaryFormatVersion = 1;

namespace binary_detail {

template <class X>
struct is_optional : std::false_type {};
template <class X>
struct is_optional<std::optional<X>> : std::true_type {};
template <class X>
struct is_vector : std::false_type {};
template <class X, class A>
struct is_vector<std::vector<X, A>> : std::true_type {};

// Visits the fields of a value to append them to `out`.
class Writer {
public:
    explicit Writer(std::string& out) : out_(out) {}

    template <class... Fs>
    void operator()(const Fs&... fields) {
        (put(fields), ...);
    }

    void varint(std::uint64_t v) {
        while (v >= 0x80) {
            out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
            v >>= 7;
        }
        out_.push_back(static_cast<char>(v));
    }

    template <class X>
    void put(const X& x) {
        if constexpr (std::is_same_v<X, bool>) {
            out_.push_back(x ? 1 : 0);
        } else if constexpr (std::is_enum_v<X>) {
            put(static_cast<std::underlying_type_t<X>>(x));
        } else if constexpr (std::is_integral_v<X> && std::is_signed_v<X>) {
            const auto v = static_cast<std::int64_t>(x);
            varint((static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63));  // zigzag
        } else if constexpr (std::is_integral_v<X>) {
            varint(static_cast<std::uint64_t>(x));
        } else if constexpr (std::is_floating_point_v<X>) {
            static_assert(sizeof(X) == 4 || sizeof(X) == 8, "float or double");
            using U = std::conditional_t<sizeof(X) == 4, std::uint32_t, std::uint64_t>;
            U u = std::bit_cast<U>(x);
            for (std::size_t i = 0; i < sizeof(U); ++i) out_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
        } else if constexpr (std::is_same_v<X, std::string>) {
            varint(x.size());
            out_.append(x);
        } else if constexpr (is_optional<X>::value) {
            out_.push_back(x ? 1 : 0);
            if (x) put(*x);
        } else if constexpr (is_vector<X>::value) {
            varint(x.size());
            for (const auto& e : x) put(e);
        } else {
            static_assert(sizeof(X) == 0, "BinaryCodec: unsupported field type");
        }
    }

private:
    std::string& out_;
};

// Visits the fields of a value to fill them from `in`; throws ProtocolError on bad bytes.
class Reader {
public:
    explicit Reader(std::string_view in) : p_(in.data()), end_(in.data() + in.size()) {}

    template <class... Fs>
    void operator()(Fs&... fields) {
        (get(fields), ...);
    }

    [[noreturn]] static void bad(const char* what) {
        throw ProtocolError(std::string("BinaryCodec: malformed payload: ") + what);
    }
    std::uint8_t byte() {
        if (p_ == end_) bad("truncated");
        return static_cast<std::uint8_t>(*p_++);
    }
    std::uint64_t varint() {
        std::uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            const std::uint8_t b = byte();
            if (shift == 63 && b > 1) bad("varint overflows 64 bits");
            v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
            if ((b & 0x80) == 0) return v;
        }
        bad("varint longer than 10 bytes");
    }
    bool at_end() const noexcept { return p_ == end_; }

    template <class X>
    void get(X& x) {
        if constexpr (std::is_same_v<X, bool>) {
            const std::uint8_t b = byte();
            if (b > 1) bad("bool is not 0 or 1");
            x = b == 1;
        } else if constexpr (std::is_enum_v<X>) {
            std::underlying_type_t<X> u{};
            get(u);
            x = static_cast<X>(u);
        } else if constexpr (std::is_integral_v<X> && std::is_signed_v<X>) {
            const std::uint64_t z = varint();
            const auto v = static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1));  // un-zigzag
            if (v < static_cast<std::int64_t>(std::numeric_limits<X>::min()) ||
                v > static_cast<std::int64_t>(std::numeric_limits<X>::max()))
                bad("integer out of the field's range");
            x = static_cast<X>(v);
        } else if constexpr (std::is_integral_v<X>) {
            const std::uint64_t v = varint();
            if (v > static_cast<std::uint64_t>(std::numeric_limits<X>::max())) bad("integer out of the field's range");
            x = static_cast<X>(v);
        } else if constexpr (std::is_floating_point_v<X>) {
            using U = std::conditional_t<sizeof(X) == 4, std::uint32_t, std::uint64_t>;
            if (static_cast<std::size_t>(end_ - p_) < sizeof(U)) bad("truncated");
            U u = 0;
            for (std::size_t i = 0; i < sizeof(U); ++i) u |= static_cast<U>(static_cast<std::uint8_t>(p_[i])) << (8 * i);
            p_ += sizeof(U);
            x = std::bit_cast<X>(u);
        } else if constexpr (std::is_same_v<X, std::string>) {
            const std::uint64_t n = varint();
            if (n > static_cast<std::uint64_t>(end_ - p_)) bad("string longer than the payload");
            x.assign(p_, static_cast<std::size_t>(n));
            p_ += n;
        } else if constexpr (is_optional<X>::value) {
            bool present = false;
            get(present);
            if (present) {
                typename X::value_type v{};
                get(v);
                x = std::move(v);
            } else {
                x.reset();
            }
        } else if constexpr (is_vector<X>::value) {
            const std::uint64_t n = varint();
            // Every element takes at least one byte: a count past that is a lie, not an allocation.
            if (n > static_cast<std::uint64_t>(end_ - p_)) bad("count longer than the payload");
            x.clear();
            x.reserve(static_cast<std::size_t>(n));
            for (std::uint64_t i = 0; i < n; ++i) {
                typename X::value_type v{};
                get(v);
                x.push_back(std::move(v));
            }
        } else {
            static_assert(sizeof(X) == 0, "BinaryCodec: unsupported field type");
        }
    }

private:
    const char* p_;
    const char* end_;
};

}  // namespace binary_detail

// True when T lists its fields with lockstep_binary_fields(fields, t) (found by ADL).
template <class T>
concept BinaryDescribed = requires(binary_detail::Writer& w, binary_detail::Reader& r, T& t) {
    lockstep_binary_fields(w, t);
    lockstep_binary_fields(r, t);
};

template <class T>
    requires BinaryDescribed<T> && std::default_initializable<T>
class BinaryCodec final : public Codec<T> {
public:
    // `format_version`: bump it when T's field list changes, so old entries become misses.
    explicit BinaryCodec(std::uint8_t format_version = kBinaryFormatVersion) : version_(format_version) {}

    std::string encode(const T& value) const override {
        std::string out;
        out.reserve(32);
        out.push_back('B');
        out.push_back(static_cast<char>(version_));
        binary_detail::Writer w(out);
        // The field lister takes T& (one function for both directions); the writer only reads.
        lockstep_binary_fields(w, const_cast<T&>(value));
        return out;
    }

    T decode(std::string_view bytes) const override {
        if (bytes.size() < 2 || bytes[0] != 'B') binary_detail::Reader::bad("not a BinaryCodec payload");
        if (static_cast<std::uint8_t>(bytes[1]) != version_) binary_detail::Reader::bad("other format version");
        binary_detail::Reader r(bytes.substr(2));
        T value{};
        lockstep_binary_fields(r, value);
        if (!r.at_end()) binary_detail::Reader::bad("trailing bytes");
        return value;
    }

private:
    std::uint8_t version_;
};

}  // namespace lockstep
