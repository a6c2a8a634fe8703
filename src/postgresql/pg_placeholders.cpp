// Rewrites `?` placeholders to PostgreSQL's $1..$n, leaving quoted text and comments alone.
#include <cctype>
#include <string>
#include <string_view>
#include <utility>

#include "postgresql/pg_common.hpp"

namespace sqllock::detail::pg {

namespace {

bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}

// If sql[i] starts a dollar-quote tag ($$ or $tag$), its length; 0 otherwise.
std::size_t dollar_tag(std::string_view sql, std::size_t i) {
  if (sql[i] != '$') return 0;
  if (i > 0 && ident_char(sql[i - 1])) return 0;  // part of an identifier like a$b
  std::size_t j = i + 1;
  if (j < sql.size() && std::isdigit(static_cast<unsigned char>(sql[j]))) return 0;  // $1
  while (j < sql.size() && ident_char(sql[j]) && sql[j] != '$') ++j;
  if (j < sql.size() && sql[j] == '$') return j - i + 1;
  return 0;
}

}  // namespace

std::pair<std::string, std::size_t> rewrite_placeholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  std::size_t count = 0;
  std::size_t i = 0;
  const std::size_t n = sql.size();
  while (i < n) {
    const char c = sql[i];
    if (c == '\'') {
      // String literal; E'...' allows backslash escapes, '' is a quote in both forms.
      const bool escapes = i > 0 && (sql[i - 1] == 'E' || sql[i - 1] == 'e') &&
                           (i < 2 || !ident_char(sql[i - 2]));
      std::size_t j = i + 1;
      while (j < n) {
        if (escapes && sql[j] == '\\' && j + 1 < n) {
          j += 2;
          continue;
        }
        if (sql[j] == '\'') {
          if (j + 1 < n && sql[j + 1] == '\'') {
            j += 2;
            continue;
          }
          break;
        }
        ++j;
      }
      j = j < n ? j + 1 : n;
      out.append(sql.substr(i, j - i));
      i = j;
    } else if (c == '"') {
      std::size_t j = i + 1;
      while (j < n) {
        if (sql[j] == '"') {
          if (j + 1 < n && sql[j + 1] == '"') {
            j += 2;
            continue;
          }
          break;
        }
        ++j;
      }
      j = j < n ? j + 1 : n;
      out.append(sql.substr(i, j - i));
      i = j;
    } else if (c == '-' && i + 1 < n && sql[i + 1] == '-') {
      std::size_t j = sql.find('\n', i);
      j = j == std::string_view::npos ? n : j + 1;
      out.append(sql.substr(i, j - i));
      i = j;
    } else if (c == '/' && i + 1 < n && sql[i + 1] == '*') {
      // Block comments nest in PostgreSQL.
      std::size_t j = i + 2;
      int depth = 1;
      while (j < n && depth > 0) {
        if (sql[j] == '/' && j + 1 < n && sql[j + 1] == '*') {
          ++depth;
          j += 2;
        } else if (sql[j] == '*' && j + 1 < n && sql[j + 1] == '/') {
          --depth;
          j += 2;
        } else {
          ++j;
        }
      }
      out.append(sql.substr(i, j - i));
      i = j;
    } else if (std::size_t tag = dollar_tag(sql, i); tag > 0) {
      const std::string_view delim = sql.substr(i, tag);
      std::size_t end = sql.find(delim, i + tag);
      std::size_t j = end == std::string_view::npos ? n : end + tag;
      out.append(sql.substr(i, j - i));
      i = j;
    } else if (c == '?') {
      out += '$';
      out += std::to_string(++count);
      ++i;
    } else {
      out += c;
      ++i;
    }
  }
  return {std::move(out), count};
}

}  // namespace sqllock::detail::pg
