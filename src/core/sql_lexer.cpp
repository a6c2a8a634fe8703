// Where SQL text is not code: quotes, comments, dollar quotes (see sql_lexer.hpp).
#include "core/sql_lexer.hpp"

#include <cctype>

namespace sqllock::detail {
namespace {

// If sql[i] starts a PostgreSQL dollar-quote tag ($$ or $tag$), its length; 0 otherwise.
std::size_t dollar_tag(std::string_view sql, std::size_t i) {
  if (sql[i] != '$') return 0;
  if (i > 0 && sql_ident_char(sql[i - 1])) return 0;  // part of an identifier like a$b
  std::size_t j = i + 1;
  if (j < sql.size() && std::isdigit(static_cast<unsigned char>(sql[j]))) return 0;  // $1
  while (j < sql.size() && sql_ident_char(sql[j]) && sql[j] != '$') ++j;
  if (j < sql.size() && sql[j] == '$') return j - i + 1;
  return 0;
}

sql_span quoted(std::string_view sql, std::size_t i, dialect d) {
  const char open = sql[i];
  const char close = open == '[' ? ']' : open;
  // Backslash escapes: MySQL strings ('...' and "..."), PostgreSQL E'...' strings.
  const bool backslash = (d == dialect::mysql && open != '`') ||
                         (d == dialect::postgresql && open == '\'' && i > 0 &&
                          (sql[i - 1] == 'E' || sql[i - 1] == 'e') && (i < 2 || !sql_ident_char(sql[i - 2])));
  const auto kind =
      open == '\'' || (d == dialect::mysql && open == '"') ? sql_span_kind::string : sql_span_kind::quoted_ident;
  std::size_t j = i + 1;
  while (j < sql.size()) {
    if (backslash && sql[j] == '\\' && j + 1 < sql.size()) {
      j += 2;
      continue;
    }
    if (sql[j] == close) {
      if (close != ']' && j + 1 < sql.size() && sql[j + 1] == close) {  // '' "" `` stand for one
        j += 2;
        continue;
      }
      return {kind, j + 1 - i, true};
    }
    ++j;
  }
  return {kind, sql.size() - i, false};
}

}  // namespace

bool sql_ident_char(char c) noexcept {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}

sql_span sql_span_at(std::string_view sql, std::size_t i, dialect d) noexcept {
  const std::size_t n = sql.size();
  if (i >= n) return {};
  const char c = sql[i];
  if ((c == '-' && i + 1 < n && sql[i + 1] == '-') || (c == '#' && d == dialect::mysql)) {
    const std::size_t eol = sql.find('\n', i);
    return {sql_span_kind::line_comment, (eol == std::string_view::npos ? n : eol) - i, true};
  }
  if (c == '/' && i + 1 < n && sql[i + 1] == '*') {
    int depth = 1;
    std::size_t j = i + 2;
    while (j < n && depth > 0) {
      if (d == dialect::postgresql && sql[j] == '/' && j + 1 < n && sql[j + 1] == '*') {
        ++depth;
        j += 2;
      } else if (sql[j] == '*' && j + 1 < n && sql[j + 1] == '/') {
        --depth;
        j += 2;
      } else {
        ++j;
      }
    }
    return {sql_span_kind::block_comment, j - i, depth == 0};
  }
  if (c == '\'' || c == '"' || (c == '`' && d != dialect::postgresql) || (c == '[' && d == dialect::sqlite)) {
    return quoted(sql, i, d);
  }
  if (d == dialect::postgresql) {
    if (const std::size_t tag = dollar_tag(sql, i); tag > 0) {
      const std::size_t end = sql.find(sql.substr(i, tag), i + tag);
      if (end == std::string_view::npos) return {sql_span_kind::dollar_string, n - i, false};
      return {sql_span_kind::dollar_string, end + tag - i, true};
    }
  }
  return {};
}

const char* sql_span_name(sql_span_kind kind) noexcept {
  switch (kind) {
    case sql_span_kind::string:
      return "string";
    case sql_span_kind::quoted_ident:
      return "quoted identifier";
    case sql_span_kind::line_comment:
    case sql_span_kind::block_comment:
      return "comment";
    case sql_span_kind::dollar_string:
      return "dollar-quoted string";
    case sql_span_kind::none:
      break;
  }
  return "code";
}

}  // namespace sqllock::detail
