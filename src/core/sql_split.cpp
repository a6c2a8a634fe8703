// Splits migration scripts into statements per dialect: quotes, comments, dollar quotes, DELIMITER.
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "core/sql_lexer.hpp"
#include "sqllock/error.hpp"
#include "sqllock/migrations.hpp"

namespace sqllock {
namespace {

using detail::sql_ident_char;
using detail::sql_span;
using detail::sql_span_at;
using detail::sql_span_kind;
using detail::sql_span_name;

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::size_t line_of(std::string_view s, std::size_t pos) {
  std::size_t line = 1;
  for (std::size_t i = 0; i < pos && i < s.size(); ++i) line += s[i] == '\n';
  return line;
}

[[noreturn]] void unterminated(std::string_view what, std::string_view script, std::size_t pos) {
  throw invalid_argument("unterminated " + std::string(what) + " starting on line " +
                         std::to_string(line_of(script, pos)));
}

// The words (outside quotes and comments) of a statement so far, upper-cased, for the few
// constructs whose bodies contain semicolons: SQLite CREATE TRIGGER ... BEGIN ... END and
// PostgreSQL BEGIN ATOMIC ... END.
struct word_tracker {
  std::vector<std::string> words;
  void add(std::string_view w) {
    std::string u(w);
    for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    words.push_back(std::move(u));
  }
  // True while a `;` does not end the statement: inside a BEGIN ... END block that the statement
  // opened (CASE ... END pairs inside it are counted too).
  bool inside_block(dialect d) const {
    bool block = false;
    if (d == dialect::sqlite) {
      // CREATE [TEMP|TEMPORARY] TRIGGER
      std::size_t i = 0;
      if (i < words.size() && words[i] == "CREATE")
        ++i;
      else
        return false;
      if (i < words.size() && (words[i] == "TEMP" || words[i] == "TEMPORARY")) ++i;
      if (i < words.size() && words[i] == "TRIGGER") block = true;
    } else if (d == dialect::postgresql) {
      for (std::size_t i = 0; i + 1 < words.size(); ++i) {
        if (words[i] == "BEGIN" && words[i + 1] == "ATOMIC") block = true;
      }
    }
    if (!block) return false;
    int depth = 0;
    bool opened = false;
    for (std::size_t i = 0; i < words.size(); ++i) {
      const auto& w = words[i];
      if (w == "BEGIN" || w == "CASE") {
        ++depth;
        opened = true;
      } else if (w == "END") {
        --depth;
      }
    }
    return !opened || depth > 0;
  }
};

}  // namespace

namespace detail {

// The splitter; `bare_placeholders`, if given, gets for each statement whether it has a `?`
// outside quotes and comments (which the binding path would take for a placeholder).
std::vector<std::string> split_sql(std::string_view script, dialect d, std::vector<bool>* bare_placeholders) {
  std::vector<std::string> out;
  bool question = false;
  const std::size_t n = script.size();
  std::string delimiter = ";";
  std::size_t start = 0;      // start of the current statement
  bool has_code = false;      // the current statement has something besides blanks and comments
  bool at_line_start = true;  // only blanks since the last newline (for DELIMITER)
  word_tracker words;

  auto emit = [&](std::size_t end) {
    if (has_code) {
      std::string s = trim(script.substr(start, end - start));
      if (!s.empty()) {
        out.push_back(std::move(s));
        if (bare_placeholders) bare_placeholders->push_back(question);
      }
    }
    has_code = false;
    question = false;
    words = {};
  };

  std::size_t i = 0;
  while (i < n) {
    const char c = script[i];
    // MySQL client's DELIMITER command: a line of its own, never sent to the server.
    if (d == dialect::mysql && at_line_start && (c == 'D' || c == 'd') && i + 9 <= n &&
        iequals(script.substr(i, 9), "DELIMITER") &&
        (i + 9 == n || std::isspace(static_cast<unsigned char>(script[i + 9])))) {
      std::size_t eol = script.find('\n', i);
      if (eol == std::string_view::npos) eol = n;
      std::string arg = trim(script.substr(i + 9, eol - i - 9));
      if (arg.empty() || arg.find_first_of(" \t") != std::string::npos) {
        throw invalid_argument("DELIMITER on line " + std::to_string(line_of(script, i)) + " needs one delimiter");
      }
      emit(i);
      delimiter = arg;
      i = eol;
      start = i;
      continue;
    }
    if (c == '\n') {
      at_line_start = true;
      ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    at_line_start = false;
    // Comments (MySQL's executable /*! ... */ are code for the server).
    const sql_span span = sql_span_at(script, i, d);
    if (span.kind == sql_span_kind::line_comment || span.kind == sql_span_kind::block_comment) {
      if (!span.terminated) unterminated(sql_span_name(span.kind), script, i);
      if (d == dialect::mysql && span.kind == sql_span_kind::block_comment && i + 2 < n && script[i + 2] == '!') {
        has_code = true;
      }
      i += span.length;
      continue;
    }
    // The delimiter ends a statement (outside BEGIN ... END bodies).
    if (script.compare(i, delimiter.size(), delimiter) == 0 && !(delimiter == ";" && words.inside_block(d))) {
      emit(i);
      i += delimiter.size();
      start = i;
      continue;
    }
    has_code = true;
    // Quoted strings and identifiers, dollar-quoted bodies.
    if (span.kind != sql_span_kind::none) {
      if (!span.terminated) {
        unterminated(span.kind == sql_span_kind::dollar_string
                         ? "dollar-quoted string " + std::string(script.substr(i, script.find('$', i + 1) + 1 - i))
                         : std::string(sql_span_name(span.kind)),
                     script, i);
      }
      i += span.length;
      continue;
    }
    if (sql_ident_char(c) && !std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t j = i;
      while (j < n && (sql_ident_char(script[j]) || script[j] == '$')) ++j;
      words.add(script.substr(i, j - i));
      i = j;
      continue;
    }
    if (c == '?') question = true;
    ++i;
  }
  emit(n);
  return out;
}

}  // namespace detail

std::vector<std::string> split_sql_statements(std::string_view script, dialect d) {
  return detail::split_sql(script, d, nullptr);
}

}  // namespace sqllock
