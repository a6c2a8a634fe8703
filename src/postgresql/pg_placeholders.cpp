// Rewrites `?` placeholders to PostgreSQL's $1..$n, leaving quoted text and comments alone.
#include <string>
#include <string_view>
#include <utility>

#include "core/sql_lexer.hpp"
#include "postgresql/pg_common.hpp"

namespace sqllock::detail::pg {

std::pair<std::string, std::size_t> rewrite_placeholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  std::size_t count = 0;
  std::size_t i = 0;
  const std::size_t n = sql.size();
  while (i < n) {
    // Strings, quoted identifiers, comments and dollar-quoted bodies are copied untouched.
    if (const sql_span span = sql_span_at(sql, i, dialect::postgresql); span.kind != sql_span_kind::none) {
      out.append(sql.substr(i, span.length));
      i += span.length;
    } else if (sql[i] == '?') {
      out += '$';
      out += std::to_string(++count);
      ++i;
    } else {
      out += sql[i];
      ++i;
    }
  }
  return {std::move(out), count};
}

}  // namespace sqllock::detail::pg
