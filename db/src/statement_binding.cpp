#include "statement_binding.h"

#include <limits>
#include <memory>

#include <cppconn/datatype.h>
#include <cppconn/parameter_metadata.h>
#include <cppconn/resultset_metadata.h>

#include "lockstep/core/error.h"

namespace lockstep::db_detail {
namespace {

// How one column is read out of the result set.
enum class Reader { Signed, Unsigned, Double, Bytes, AlwaysNull };

Reader reader_for(int data_type, bool is_signed) {
    switch (data_type) {
        case sql::DataType::BIT:
        case sql::DataType::TINYINT:
        case sql::DataType::SMALLINT:
        case sql::DataType::MEDIUMINT:
        case sql::DataType::INTEGER:
        case sql::DataType::BIGINT:
        case sql::DataType::YEAR:
            return is_signed ? Reader::Signed : Reader::Unsigned;
        case sql::DataType::REAL:
        case sql::DataType::DOUBLE:
            return Reader::Double;
        case sql::DataType::SQLNULL:
            return Reader::AlwaysNull;
        default:
            // DECIMAL stays exact as text; dates, ENUM, SET, JSON, text and binary are bytes.
            return Reader::Bytes;
    }
}

}  // namespace

void bind_params(sql::PreparedStatement& statement, const SqlParams& params, std::string_view sql) {
    const auto expected = static_cast<unsigned int>(statement.getParameterMetaData()->getParameterCount());
    if (params.size() != expected) {
        throw ConfigError("SQL parameters", "the statement has " + std::to_string(expected) +
                                                " placeholder(s) but " + std::to_string(params.size()) +
                                                " parameter(s) were given: '" +
                                                std::string(sql.substr(0, 160)) + "'");
    }
    for (unsigned int i = 0; i < expected; ++i) {
        const unsigned int index = i + 1;  // JDBC counts from 1
        const SqlValue& p = params[i];
        switch (p.type()) {
            case SqlValue::Type::Null:
                statement.setNull(index, sql::DataType::SQLNULL);
                break;
            case SqlValue::Type::Int64:
                statement.setInt64(index, p.as_int64());
                break;
            case SqlValue::Type::Double:
                statement.setDouble(index, p.as_double());
                break;
            case SqlValue::Type::String:
                // SQLString holds a std::string and setString copies (pointer, length): NUL bytes
                // and non-UTF-8 bytes go through unchanged.
                statement.setString(index, sql::SQLString(p.as_string()));
                break;
        }
    }
}

unsigned int result_column_count(sql::PreparedStatement& statement) {
    sql::ResultSetMetaData* meta = statement.getMetaData();  // owned by the statement
    return meta ? meta->getColumnCount() : 0;
}

std::vector<Row> read_rows(sql::ResultSet& result) {
    sql::ResultSetMetaData* meta = result.getMetaData();  // owned by the result set
    const unsigned int count = meta->getColumnCount();
    auto columns = std::make_shared<RowColumns>();
    std::vector<Reader> readers;
    columns->names.reserve(count);
    columns->sql_types.reserve(count);
    readers.reserve(count);
    for (unsigned int c = 1; c <= count; ++c) {
        columns->names.push_back(meta->getColumnLabel(c).asStdString());
        columns->sql_types.push_back(meta->getColumnTypeName(c).asStdString());
        readers.push_back(reader_for(meta->getColumnType(c), meta->isSigned(c)));
    }
    std::shared_ptr<const RowColumns> shared = std::move(columns);

    std::vector<Row> rows;
    rows.reserve(result.rowsCount());
    while (result.next()) {
        std::vector<SqlValue> values;
        values.reserve(count);
        for (unsigned int c = 1; c <= count; ++c) {
            const Reader reader = readers[c - 1];
            if (reader == Reader::AlwaysNull || result.isNull(c)) {
                values.emplace_back();
                continue;
            }
            switch (reader) {
                case Reader::Signed:
                    values.emplace_back(static_cast<std::int64_t>(result.getInt64(c)));
                    break;
                case Reader::Unsigned: {
                    const std::uint64_t v = result.getUInt64(c);
                    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
                        throw ProtocolError("column '" + shared->names[c - 1] + "' (" +
                                            shared->sql_types[c - 1] +
                                            " UNSIGNED) holds a value above 2^63-1, which does not "
                                            "fit int64; CAST it to CHAR in SQL");
                    }
                    values.emplace_back(static_cast<std::int64_t>(v));
                    break;
                }
                case Reader::Double:
                    values.emplace_back(static_cast<double>(result.getDouble(c)));
                    break;
                case Reader::Bytes:
                case Reader::AlwaysNull: {
                    values.emplace_back(result.getString(c).asStdString());
                    break;
                }
            }
        }
        rows.emplace_back(shared, std::move(values));
    }
    return rows;
}

}  // namespace lockstep::db_detail
