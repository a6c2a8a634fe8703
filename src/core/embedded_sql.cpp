// Lookup of embedded SQL texts, rendering of table-name placeholders, and the log hook.
#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <string>

#include "core/backend.hpp"
#include "core/embedded_sql_table.hpp"

namespace sqllock::detail {

std::string_view embedded_sql(std::string_view dialect_name, std::string_view name) {
  std::string path = "sql/" + std::string(dialect_name) + "/" + std::string(name) + ".sql";
  for (std::size_t i = 0; i < embedded_file_count; ++i) {
    if (path == embedded_files[i].path) return embedded_files[i].text;
  }
  throw std::logic_error("sqllock: no embedded statement " + path);
}

std::vector<embedded_migration> embedded_migrations(std::string_view dialect_name) {
  std::string prefix = "migrations/" + std::string(dialect_name) + "/";
  std::vector<embedded_migration> out;
  for (std::size_t i = 0; i < embedded_file_count; ++i) {
    std::string_view path = embedded_files[i].path;
    if (!path.starts_with(prefix)) continue;
    std::string_view file = path.substr(prefix.size());
    int version = 0;
    auto [end, ec] = std::from_chars(file.data(), file.data() + file.size(), version);
    if (ec != std::errc() || end == file.data() || *end != '_') {
      throw std::logic_error("sqllock: migration file without a version prefix: " + std::string(path));
    }
    out.push_back({version, file, embedded_files[i].text});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.version < b.version; });
  return out;
}

namespace {

/// render_sql, with the depth of parts being rendered (a part that names itself is an error, not a
/// stack overflow).
std::string render(std::string_view sql_template, std::string_view table, dialect d, int depth) {
  if (depth > 4) throw std::logic_error("sqllock: SQL parts nested more than 4 deep");
  const std::string locks = quote_identifier(table, d);
  const std::string schema_table = quote_identifier(std::string(table) + "_schema", d);
  // Migration 0003: the semaphore table, and (SQLite) the lock table's rebuild under a temporary
  // name that is then renamed to the table's own, unqualified name.
  const std::string semaphores_table = quote_identifier(std::string(table) + "_semaphores", d);
  // Migration 0004: the fair-mode queue (tickets).
  const std::string queue_table = quote_identifier(std::string(table) + "_queue", d);
  const std::string rebuild_table = quote_identifier(std::string(table) + "_rebuild", d);
  const auto dot = table.find('.');
  const std::string bare_table =
      quote_identifier(dot == std::string_view::npos ? table : table.substr(dot + 1), d);
  std::string out;
  out.reserve(sql_template.size() + 64);
  std::size_t pos = 0;
  while (pos < sql_template.size()) {
    std::size_t open = sql_template.find("{{", pos);
    if (open == std::string_view::npos) {
      out.append(sql_template.substr(pos));
      break;
    }
    std::size_t close = sql_template.find("}}", open);
    if (close == std::string_view::npos) throw std::logic_error("sqllock: unterminated placeholder in SQL");
    out.append(sql_template.substr(pos, open - pos));
    std::string_view key = sql_template.substr(open + 2, close - open - 2);
    if (key == "locks") {
      out += locks;
    } else if (key == "locks_schema") {
      out += schema_table;
    } else if (key == "locks_semaphores") {
      out += semaphores_table;
    } else if (key == "locks_queue") {
      out += queue_table;
    } else if (key == "locks_rebuild") {
      out += rebuild_table;
    } else if (key == "locks_bare") {
      out += bare_table;
    } else if (key.starts_with("part:")) {
      // sql/<dialect>/part_NAME.sql: a piece several statements share (a CTE, an expression),
      // rendered in place without its file's trailing newline.
      std::string part = render(embedded_sql(d, "part_" + std::string(key.substr(5))), table, d, depth + 1);
      while (!part.empty() && (part.back() == '\n' || part.back() == ' ')) part.pop_back();
      out += part;
    } else {
      throw std::logic_error("sqllock: unknown SQL placeholder {{" + std::string(key) + "}}");
    }
    pos = close + 2;
  }
  return out;
}

}  // namespace

std::string render_sql(std::string_view sql_template, std::string_view table, dialect d) {
  return render(sql_template, table, d, 0);
}

std::string_view embedded_sql(sqllock::dialect d, std::string_view name) { return embedded_sql(dialect_name(d), name); }

std::vector<embedded_migration> embedded_migrations(sqllock::dialect d) { return embedded_migrations(dialect_name(d)); }

std::string_view dialect_name(sqllock::dialect d) noexcept {
  switch (d) {
    case sqllock::dialect::postgresql:
      return "postgresql";
    case sqllock::dialect::mysql:
      return "mysql";
    case sqllock::dialect::sqlite:
      break;
  }
  return "sqlite";
}

std::string_view backend::kind() const noexcept { return dialect_name(dialect()); }

std::chrono::milliseconds time_until(steady::time_point deadline, std::chrono::milliseconds floor) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
  return std::max(left, floor);
}

void log_message(const client_options& options, log_level level, std::string_view message) noexcept {
  if (!options.log) return;
  try {
    options.log(level, message);
  } catch (...) {
    // A throwing log callback must not break lock bookkeeping; nothing else can be done here.
  }
}

}  // namespace sqllock::detail
