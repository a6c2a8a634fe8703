// Bound parameter values and result rows for statements run on the user's own tables.
#pragma once

#include "sqllock/export.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace sqllock {

/// A value bound to a `?` placeholder: NULL (std::monostate), integer, floating point or text.
using value = std::variant<std::monostate, std::int64_t, double, std::string>;

/// One result row; every column as text, NULL as std::nullopt.
struct SQLLOCK_EXPORT result_row {
  std::vector<std::optional<std::string>> columns;  ///< the columns in the order asked for

  /// The number of columns.
  std::size_t size() const noexcept { return columns.size(); }
  /// Column i (std::out_of_range past the end).
  const std::optional<std::string>& operator[](std::size_t i) const { return columns.at(i); }
  /// Column i as an integer; throws sqllock::invalid_argument if it is NULL or not a number.
  std::int64_t as_int(std::size_t i) const;
  /// Column i as text; throws sqllock::invalid_argument if it is NULL.
  const std::string& as_text(std::size_t i) const;
};

using result_rows = std::vector<result_row>;

}  // namespace sqllock
