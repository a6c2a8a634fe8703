// The one place that knows where SQL text is not code: quoted strings and identifiers, comments,
// PostgreSQL dollar-quoted bodies, per dialect. Used by the statement splitter (migrations) and
// the PostgreSQL placeholder rewriter, so that both agree on what a `?` or a `;` inside a string is.
#pragma once

#include <cstddef>
#include <string_view>

#include "sqllock/parse.hpp"

namespace sqllock::detail {

/// True for characters that continue an identifier (letters, digits, `_`, non-ASCII bytes).
bool sql_ident_char(char c) noexcept;

/// What starts at a position of SQL text, when it is not code.
enum class sql_span_kind {
  none,           ///< code
  string,         ///< '...' (E'...' with backslash escapes in PostgreSQL; backslashes in MySQL)
  quoted_ident,   ///< "..." and, per dialect, `...` (MySQL, SQLite) or [...] (SQLite)
  line_comment,   ///< -- to the end of the line (and # in MySQL); the newline is not included
  block_comment,  ///< /* ... */ (nested in PostgreSQL)
  dollar_string,  ///< $$...$$ or $tag$...$tag$ (PostgreSQL)
};

struct sql_span {
  sql_span_kind kind = sql_span_kind::none;
  std::size_t length = 0;  ///< bytes from the start position; to the end of the text if unterminated
  bool terminated = true;  ///< false: the text ended inside it
};

/// The string, quoted identifier, comment or dollar-quoted body that starts at sql[i], if any.
sql_span sql_span_at(std::string_view sql, std::size_t i, dialect d) noexcept;

/// Its name in error messages: "string", "quoted identifier", "comment", "dollar-quoted string".
const char* sql_span_name(sql_span_kind kind) noexcept;

}  // namespace sqllock::detail
