// InspectedEntity: how the ConsistencyInspector compares a cached value of one entity with the
// committed row, by content and not only by version. Outside writers (C9: another service, a
// migration, a trigger, the library's own db-level fenced_update) change columns without bumping
// `version`; a version comparison alone calls such an entry fresh.
//
//   lockstep::ConsistencyInspector inspector(mysql, redis, map, options);
//   inspector.compare_content(lockstep::inspected_entity(product_entity(), "ls:"));
//   inspector.start();
//
// What is compared: the cached payload decoded by the entity's codec, and the committed row read
// the way the repository reads it (the same SELECT list: key, version, `columns`,
// `read_only_columns`; the same Connector/C++ conversions into a Row; the same `from_row`), both
// encoded again by the same codec, byte for byte. Both sides take one decoding path, so the
// binlog's own renderings (FLOAT as 4 IEEE bytes, DECIMAL and DATETIME as text with their scale /
// fractional digits, TIMESTAMP as epoch seconds, ENUM as an index) never meet the codec's JSON.
// What is not compared: columns the entity does not list (never cached, so never stale), and
// whatever `from_row` or the codec drops or rounds (a DECIMAL kept as a double compares as that
// double). REQUIRES of the codec: equal values encode to equal bytes (JsonCodec and BinaryCodec
// do; a codec writing an unordered container in hash order would report false staleness).
//
// Thread safety: a plain value; `compare` is safe to call from many threads when the entity's
// functions and codec are (entity.h requires that of them).
#pragma once

#include <concepts>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/db/row.h"
#include "lockstep/strategies/binary_codec.h"
#include "lockstep/strategies/codec.h"
#include "lockstep/strategies/entity.h"

namespace lockstep {

struct InspectedEntity {
    enum class Content {
        Same,        // the payload holds what the row holds
        Differs,     // stale by content
        Unreadable,  // the payload does not decode: readers treat it as a miss (not stale)
    };

    // Entity<T>::name and the repository's key prefix: the InvalidationMap binding it belongs to.
    std::string entity;
    std::string prefix = "ls:";
    // What the repository SELECTs (entity.h).
    std::string table;
    std::string key_column = "id";
    std::string version_column = "version";
    std::vector<std::string> columns;  // data columns, then read-only ones
    // Compares a cached payload with the committed row. Throws what from_row throws (a row the
    // repository could not load either).
    std::function<Content(std::string_view payload, const Row& committed)> compare;
};

// The comparison for `entity`, whose values the repository with key prefix `prefix` caches. The
// codec is the one the repository picks (cached_repository.h, `checked`): entity.codec, else
// BinaryCodec when T describes its fields, else JsonCodec. ConfigError when from_row is missing
// or T has no codec.
template <class T>
InspectedEntity inspected_entity(const Entity<T>& entity, std::string prefix = "ls:") {
    if (!entity.from_row) throw ConfigError("entity.from_row", "missing");
    std::shared_ptr<const Codec<T>> codec = entity.codec;
    if (!codec) {
        if constexpr (BinaryDescribed<T> && std::default_initializable<T>) {
            codec = std::make_shared<BinaryCodec<T>>();
        } else if constexpr (JsonConvertible<T>) {
            codec = std::make_shared<JsonCodec<T>>();
        } else {
            throw ConfigError("entity.codec", "missing, and T has neither lockstep_binary_fields nor to_json/from_json");
        }
    }
    InspectedEntity out;
    out.entity = entity.name;
    out.prefix = std::move(prefix);
    out.table = entity.table;
    out.key_column = entity.key_column;
    out.version_column = entity.version_column;
    out.columns = entity.columns;
    out.columns.insert(out.columns.end(), entity.read_only_columns.begin(), entity.read_only_columns.end());
    out.compare = [codec, from_row = entity.from_row](std::string_view payload, const Row& committed) {
        std::string cached;
        try {
            cached = codec->encode(codec->decode(payload));
        } catch (const std::exception&) {
            return InspectedEntity::Content::Unreadable;
        }
        return cached == codec->encode(from_row(committed)) ? InspectedEntity::Content::Same
                                                            : InspectedEntity::Content::Differs;
    };
    return out;
}

}  // namespace lockstep
