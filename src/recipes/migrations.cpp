// The migration runner: files, history table, lease, per-dialect apply (transactional or recorded).
#include "sqllock/migrations.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>

#include "core/sql_lexer.hpp"
#include "sqllock/error.hpp"

namespace sqllock {
namespace detail {
std::vector<std::string> split_sql(std::string_view script, dialect d, std::vector<bool>* bare_placeholders);
}  // namespace detail

namespace {

using steady = std::chrono::steady_clock;

dialect dialect_of(client& c) {
  const auto k = c.backend_name();
  if (k == "postgresql") return dialect::postgresql;
  if (k == "mysql") return dialect::mysql;
  return dialect::sqlite;
}

// DDL commits implicitly on MySQL/MariaDB; PostgreSQL and SQLite roll DDL back with the rest.
bool transactional_ddl(dialect d) { return d != dialect::mysql; }

std::string lease_name(const migrate_options& o) { return "sqllock:migrations:" + o.history_table; }

std::string pad_version(std::int64_t v) {
  std::string s = std::to_string(v);
  if (s.size() < 4) s.insert(0, 4 - s.size(), '0');
  return s;
}

std::string history_ddl(dialect d, const std::string& table) {
  const std::string t = quote_identifier(table, d);
  switch (d) {
    case dialect::postgresql:
      return "CREATE TABLE IF NOT EXISTS " + t +
             " (version bigint PRIMARY KEY, name text NOT NULL, checksum text NOT NULL, status text NOT NULL,"
             " duration_ms bigint NOT NULL DEFAULT 0, applied_by text NOT NULL,"
             " applied_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP, error text)";
    case dialect::mysql:
      return "CREATE TABLE IF NOT EXISTS " + t +
             " (version BIGINT NOT NULL PRIMARY KEY, name VARCHAR(255) NOT NULL, checksum CHAR(64) NOT NULL,"
             " status VARCHAR(16) NOT NULL, duration_ms BIGINT NOT NULL DEFAULT 0,"
             " applied_by VARCHAR(512) NOT NULL, applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),"
             " error TEXT NULL) ENGINE=InnoDB";
    case dialect::sqlite:
      break;
  }
  return "CREATE TABLE IF NOT EXISTS " + t +
         " (version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, status TEXT NOT NULL,"
         " duration_ms INTEGER NOT NULL DEFAULT 0, applied_by TEXT NOT NULL,"
         " applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP, error TEXT)";
}

bool history_exists(client& c, dialect d, const std::string& table) {
  auto tx = c.begin();
  result_rows rows;
  const auto dot = table.find('.');
  switch (d) {
    case dialect::postgresql:
      rows = tx.query("SELECT CASE WHEN to_regclass(?) IS NULL THEN 0 ELSE 1 END", {quote_identifier(table, d)});
      break;
    case dialect::mysql:
      if (dot == std::string::npos) {
        rows = tx.query(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
            {table});
      } else {
        rows = tx.query("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
                        {table.substr(0, dot), table.substr(dot + 1)});
      }
      break;
    case dialect::sqlite:
      if (dot == std::string::npos) {
        rows = tx.query("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?", {table});
      } else {
        rows = tx.query("SELECT COUNT(*) FROM " + quote_identifier(table.substr(0, dot), d) +
                            ".sqlite_master WHERE type = 'table' AND name = ?",
                        {table.substr(dot + 1)});
      }
      break;
  }
  tx.commit();
  return !rows.empty() && rows[0].as_int(0) > 0;
}

std::vector<migration_record> read_history(client& c, dialect d, const std::string& table) {
  const std::string t = quote_identifier(table, d);
  auto tx = c.begin();
  auto rows = tx.query("SELECT version, name, checksum, status, duration_ms, applied_by, applied_at, error FROM " + t +
                       " ORDER BY version");
  tx.commit();
  std::vector<migration_record> out;
  for (const auto& r : rows) {
    migration_record m;
    m.version = r.as_int(0);
    m.name = r[1].value_or("");
    m.checksum = r[2].value_or("");
    m.status = r[3].value_or("");
    m.duration_ms = r[4] ? r.as_int(4) : 0;
    m.applied_by = r[5].value_or("");
    m.applied_at = r[6].value_or("");
    m.error = r[7].value_or("");
    out.push_back(std::move(m));
  }
  return out;
}

void ensure_history(client& c, dialect d, const std::string& table) {
  if (history_exists(c, d, table)) return;
  auto tx = c.begin();
  tx.execute(history_ddl(d, table));
  tx.commit();
}

bool counts_as_applied(const migration_record& m) { return m.status == "applied" || m.status == "resolved"; }

std::string resolve_hint(std::int64_t version) {
  return "fix the schema by hand, then run `sqllock migrate --dir DIR --resolve " + std::to_string(version) +
         "` to record it as applied (or undo its partial effects and run `sqllock migrate --dir DIR --retry " +
         std::to_string(version) + "` to apply it again)";
}

// Errors a failing migration statement produces; others (connection, lease) pass through as is.
template <class Fn>
void as_migration_failure(const migration_file& f, const std::string& suffix, Fn&& fn) {
  try {
    fn();
  } catch (const database_error& e) {
    throw migration_failed("migration " + f.name + " failed: " + e.what() + suffix, f.version, f.name);
  } catch (const invalid_argument& e) {
    throw migration_failed("migration " + f.name + " failed: " + e.what() + suffix, f.version, f.name);
  } catch (const retryable_error& e) {
    throw migration_failed("migration " + f.name + " failed: " + e.what() + suffix, f.version, f.name);
  } catch (const lock_not_available& e) {
    throw migration_failed("migration " + f.name + " failed: " + e.what() + suffix, f.version, f.name);
  } catch (const query_canceled& e) {
    throw migration_failed("migration " + f.name + " failed: " + e.what() + suffix, f.version, f.name);
  } catch (const schema_missing& e) {  // a table the migration expects is not there
    throw migration_failed("migration " + f.name + " failed: " + e.what() + suffix, f.version, f.name);
  }
}

// The first two words of a statement, upper-cased, after leading comments (the dialect's own:
// PostgreSQL nests block comments).
std::pair<std::string, std::string> leading_words(std::string_view s, dialect d) {
  std::size_t i = 0;
  std::string words[2];
  for (auto& w : words) {
    for (;;) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      const auto span = detail::sql_span_at(s, i, d);
      if (span.kind != detail::sql_span_kind::line_comment && span.kind != detail::sql_span_kind::block_comment) break;
      i += span.length;
    }
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) {
      w += static_cast<char>(std::toupper(static_cast<unsigned char>(s[i])));
      ++i;
    }
  }
  return {words[0], words[1]};
}

std::vector<std::string> statements_of(const migration_file& f, dialect d) {
  std::vector<std::string> statements;
  std::vector<bool> placeholders;
  try {
    statements = detail::split_sql(f.text, d, &placeholders);
  } catch (const invalid_argument& e) {
    throw invalid_argument("migration " + f.name + ": " + e.what());
  }
  for (std::size_t i = 0; i < statements.size(); ++i) {
    if (placeholders[i]) {
      throw invalid_argument("migration " + f.name + ", statement " + std::to_string(i + 1) +
                             ": a `?` outside quotes would be taken for a bind placeholder (statements run "
                             "through the binding path)" +
                             (d == dialect::postgresql
                                  ? "; for the jsonb operators use jsonb_exists(), jsonb_exists_any(), "
                                    "jsonb_exists_all(), or put the code in a dollar-quoted function body"
                                  : ""));
    }
  }
  if (transactional_ddl(d)) {
    // The runner wraps each file in one transaction; a COMMIT inside would break "all or nothing".
    for (const auto& s : statements) {
      const auto [first, second] = leading_words(s, d);
      if (first == "BEGIN" || first == "START" || first == "COMMIT" || first == "END" || first == "ABORT" ||
          (first == "ROLLBACK" && second != "TO")) {
        throw invalid_argument("migration " + f.name + ": remove the transaction statement '" + first +
                               "': sqllock runs each migration file in one transaction of its own");
      }
    }
  }
  return statements;
}

void check_lease(const lease_guard& lease, const migration_file& f) {
  // usable(), not lost(): lost() waits for the client's deadline thread, which may run late; past
  // the lease's loss point by this process's clock another migrator may take the lease now.
  if (!lease.usable()) {
    throw lease_lost("the migration lease '" + lease.name() + "' was lost before " + f.name + " committed; run again");
  }
}

migration_record apply_transactional(client& c, dialect d, const std::string& t, const migration_file& f,
                                     const lease_guard& lease, const migrate_options& o) {
  const auto statements = statements_of(f, d);
  migration_record rec{f.version, f.name, f.checksum, "applied", 0, lease.holder_id(), "", ""};
  as_migration_failure(f, "; nothing of it was applied (rolled back)", [&] {
    auto tx = c.begin();
    // Before anything runs, the lease is checked on the database and its row locked until the
    // commit (SQLite: the write lock), so that no other migrator can take it over meanwhile: the
    // lease may have been lost since the runner decided to start (lease_lost: run again).
    tx.require_lease(lease);
    // The history row first: its primary key also stops any second writer of this version.
    tx.execute(
        "INSERT INTO " + t + " (version, name, checksum, status, duration_ms, applied_by) VALUES (?, ?, ?, ?, 0, ?)",
        {f.version, f.name, f.checksum, std::string("applied"), rec.applied_by});
    const auto start = steady::now();
    for (const auto& s : statements) tx.execute(s);
    rec.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - start).count();
    tx.execute("UPDATE " + t + " SET duration_ms = ? WHERE version = ?", {rec.duration_ms, f.version});
    if (o.before_commit) o.before_commit(f.version);
    // PostgreSQL: the lease's row lock does not stop its expiry; past the loss point another
    // migrator may be about to take it over: stop here. SQLite: our transaction holds the
    // database's write lock, which no other migrator can pass (and which keeps the watchdog from
    // renewing), so a lease that was held when it began and expired meanwhile is still exclusive.
    if (d == dialect::postgresql) check_lease(lease, f);
    tx.commit();
  });
  return rec;
}

migration_record apply_recorded(client& c, dialect d, const std::string& t, const migration_file& f,
                                const lease_guard& lease, const migrate_options& o) {
  const auto statements = statements_of(f, d);
  migration_record rec{f.version, f.name, f.checksum, "applied", 0, lease.holder_id(), "", ""};
  {
    // Committed before any DDL runs, so a crash leaves a visible "running" row; and only while the
    // lease is held (checked on the database, its row locked until this commit), which may have
    // been lost since the runner decided to start (lease_lost: run again).
    auto tx = c.begin();
    tx.require_lease(lease);
    tx.execute(
        "INSERT INTO " + t + " (version, name, checksum, status, duration_ms, applied_by) VALUES (?, ?, ?, ?, 0, ?)",
        {f.version, f.name, f.checksum, std::string("running"), rec.applied_by});
    tx.commit();
  }
  std::string failure;
  const auto start = steady::now();
  try {
    as_migration_failure(f, "", [&] {
      auto tx = c.begin();
      for (const auto& s : statements) tx.execute(s);
      rec.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - start).count();
      if (o.before_commit) o.before_commit(f.version);
      // No lease check here: the DDL has committed already, so the truthful record is "applied".
      tx.execute("UPDATE " + t +
                     " SET status = 'applied', duration_ms = ?, applied_at = CURRENT_TIMESTAMP(6) WHERE version = ?",
                 {rec.duration_ms, f.version});
      tx.commit();
    });
    return rec;
  } catch (const migration_failed& e) {
    failure = e.what();
  }
  if (failure.size() > 4000) failure.resize(4000);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - start).count();
  auto tx = c.begin();
  tx.execute("UPDATE " + t + " SET status = 'failed', error = ?, duration_ms = ? WHERE version = ?",
             {failure, ms, f.version});
  tx.commit();
  throw migration_failed(failure + "; recorded as failed (MySQL commits DDL at once, so part of it may be applied): " +
                             resolve_hint(f.version),
                         f.version, f.name);
}

void validate_options(const migrate_options& o) {
  validate_identifier(o.history_table);
  validate_ttl(o.lock_ttl);
  if (o.wait.count() < 0) throw invalid_argument("migrate: negative wait");
  if (o.max_migrations < 0) throw invalid_argument("migrate: negative max_migrations");
}

lease_guard take_lease(client& c, const migrate_options& o) {
  if (c.schema_version() != client::required_schema_version()) c.migrate();  // schema_too_new when newer
  lease_options lease_opts;
  lease_opts.ttl = o.lock_ttl;
  return c.acquire_for(lease_name(o), o.wait, lease_opts);
}

}  // namespace

std::vector<migration_file> read_migration_directory(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw invalid_argument("migrations: '" + dir.string() + "' is not a readable directory");
  }
  std::vector<migration_file> files;
  std::map<std::int64_t, std::string> seen;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 6 || !name.ends_with(".sql")) continue;
    std::size_t digits = 0;
    while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[digits]))) ++digits;
    if (digits == 0) continue;  // not a migration file (e.g. README.sql)
    if (digits >= name.size() - 4 || name[digits] != '_') {
      throw invalid_argument("migrations: '" + name + "' must be named <version>_<name>.sql, e.g. 0001_init.sql");
    }
    std::int64_t version = 0;
    auto [end, err] = std::from_chars(name.data(), name.data() + digits, version);
    if (err != std::errc() || version <= 0) {
      throw invalid_argument("migrations: '" + name + "' has an invalid version (1 up to 2^63-1)");
    }
    if (auto it = seen.find(version); it != seen.end()) {
      throw invalid_argument("migrations: '" + name + "' and '" + it->second + "' have the same version " +
                             std::to_string(version));
    }
    if (!entry.is_regular_file()) throw invalid_argument("migrations: '" + name + "' is not a regular file");
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) throw invalid_argument("migrations: cannot read '" + entry.path().string() + "'");
    seen.emplace(version, name);
    migration_file f;
    f.version = version;
    f.name = name;
    f.path = entry.path();
    f.text = text.str();
    f.checksum = sha256_hex(f.text);
    files.push_back(std::move(f));
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.version < b.version; });
  return files;
}

std::vector<migration_record> migration_history(client& c, const migrate_options& options) {
  validate_identifier(options.history_table);
  const dialect d = dialect_of(c);
  if (!history_exists(c, d, options.history_table)) return {};
  return read_history(c, d, options.history_table);
}

namespace {

// One planning pass under the lease: validate the history against the files, return what is pending.
std::vector<const migration_file*> plan(client& c, dialect d, const std::filesystem::path& dir,
                                        const std::vector<migration_file>& files, const migrate_options& o,
                                        migrate_report& report) {
  ensure_history(c, d, o.history_table);
  const auto history = read_history(c, d, o.history_table);
  std::map<std::int64_t, const migration_file*> by_version;
  for (const auto& f : files) by_version[f.version] = &f;
  std::map<std::int64_t, bool> done;
  std::int64_t highest = 0;
  report.missing_files.clear();
  for (const auto& h : history) {
    done[h.version] = true;
    auto it = by_version.find(h.version);
    if (it == by_version.end()) {
      report.missing_files.push_back(h.name);
    } else if (counts_as_applied(h) && h.checksum != it->second->checksum) {
      throw checksum_mismatch("migration " + it->second->name + " (version " + std::to_string(h.version) +
                                  ") was changed after it was applied: its SHA-256 is " + it->second->checksum +
                                  ", the history has " + h.checksum + "; restore the file, or add a new migration",
                              h.version, it->second->name);
    }
    if (h.status == "failed") {
      throw migration_failed("migration " + h.name + " failed earlier: " + h.error + "; " + resolve_hint(h.version),
                             h.version, h.name);
    }
    if (h.status == "running") {
      throw migration_failed("migration " + h.name + " was interrupted (its migrator died while applying it; " +
                                 "part of it may be applied); " + resolve_hint(h.version),
                             h.version, h.name);
    }
    if (counts_as_applied(h)) highest = std::max(highest, h.version);
  }
  if (o.fail_on_missing_files && !report.missing_files.empty()) {
    std::string list;
    for (const auto& m : report.missing_files) list += (list.empty() ? "" : ", ") + m;
    throw migration_failed("applied migrations whose files are gone from '" + dir.string() + "': " + list, 0,
                           report.missing_files.front());
  }
  std::vector<const migration_file*> pending;
  for (const auto& f : files) {
    if (done.count(f.version)) continue;
    if (f.version < highest) {
      throw migration_failed("migration " + f.name + " is older than the applied version " + pad_version(highest) +
                                 " but was never applied (out of order); give it a version above " +
                                 std::to_string(highest),
                             f.version, f.name);
    }
    pending.push_back(&f);
  }
  report.current_version = std::max(report.current_version, highest);
  return pending;
}

}  // namespace

migrate_report migrate_directory(client& c, const std::filesystem::path& dir, const migrate_options& o) {
  validate_options(o);
  const dialect d = dialect_of(c);
  const auto files = read_migration_directory(dir);
  const std::string t = quote_identifier(o.history_table, d);
  migrate_report report;
  // A lease lost between migrations (e.g. SQLite cannot renew while a long migration holds the
  // database's write lock) is taken again and the plan redone; give up after a few rounds
  // without progress.
  int rounds_without_progress = 0;
  for (;;) {
    lease_guard lease = take_lease(c, o);
    report.fencing_token = lease.fencing_token();
    const auto pending = plan(c, d, dir, files, o, report);
    for (const auto* f : pending) (void)statements_of(*f, d);  // a bad file stops the run before any applies
    bool lost = false;
    bool progress = false;
    for (const auto* f : pending) {
      if (o.max_migrations > 0 && static_cast<int>(report.applied.size()) >= o.max_migrations) break;
      // usable(), not lost(): lost() waits for the client's deadline thread, which may run late;
      // past the lease's loss point another migrator may hold the lease now (check_lease).
      if (!lease.usable()) {
        lost = true;
        break;
      }
      if (o.on_start) o.on_start(f->version, f->name);
      try {
        migration_record rec =
            transactional_ddl(d) ? apply_transactional(c, d, t, *f, lease, o) : apply_recorded(c, d, t, *f, lease, o);
        report.applied.push_back(std::move(rec));
        report.current_version = f->version;
        progress = true;
      } catch (const lease_lost&) {
        lost = true;  // PostgreSQL: that migration was rolled back
        break;
      }
    }
    // The lease is still ours if nobody took it over (the release's owner check proves it). Gone
    // (lease_lost) or unanswered (connection_lost: sent again in the background, else it expires
    // after lock_ttl), it changes nothing of what this run applied: every migration committed
    // only while the lease was held, and a finished run reports what it applied.
    try {
      lease.release();
    } catch (const error&) {
    }
    if (!lost) return report;
    rounds_without_progress = progress ? 0 : rounds_without_progress + 1;
    if (rounds_without_progress >= 3) {
      throw lease_lost("the migration lease '" + lease_name(o) +
                       "' was lost repeatedly without progress; use a longer lock_ttl (--lock-ttl)");
    }
  }
}

migration_record resolve_migration(client& c, const std::filesystem::path& dir, std::int64_t version,
                                   migration_resolution resolution, const migrate_options& o) {
  validate_options(o);
  if (version <= 0) throw invalid_argument("resolve: the version must be positive");
  const dialect d = dialect_of(c);
  const migration_file* file = nullptr;
  const auto files =
      resolution == migration_resolution::applied ? read_migration_directory(dir) : std::vector<migration_file>{};
  for (const auto& f : files) {
    if (f.version == version) file = &f;
  }
  if (resolution == migration_resolution::applied && !file) {
    throw invalid_argument("resolve: no file for version " + std::to_string(version) + " in '" + dir.string() + "'");
  }
  lease_guard lease = take_lease(c, o);
  ensure_history(c, d, o.history_table);
  const std::string t = quote_identifier(o.history_table, d);
  const migration_record* row = nullptr;
  const auto history = read_history(c, d, o.history_table);
  for (const auto& h : history) {
    if (h.version == version) row = &h;
  }
  if (!row || (row->status != "failed" && row->status != "running")) {
    throw migration_failed("resolve: version " + std::to_string(version) + " is " +
                               (row ? "'" + row->status + "'" : std::string("not in the history")) +
                               "; only a failed or interrupted migration can be resolved",
                           version, row ? row->name : "");
  }
  migration_record out = *row;
  auto tx = c.begin();
  // Only while the lease is held, checked on the database with its row locked until the commit, as
  // a migration's first transaction: it may have been lost (and taken over) since it was taken.
  tx.require_lease(lease);
  if (resolution == migration_resolution::applied) {
    tx.execute("UPDATE " + t + " SET status = 'resolved', name = ?, checksum = ?, applied_by = ?, applied_at = " +
                   (d == dialect::mysql ? "CURRENT_TIMESTAMP(6)" : "CURRENT_TIMESTAMP") + " WHERE version = ?",
               {file->name, file->checksum, lease.holder_id(), version});
    out.status = "resolved";
    out.name = file->name;
    out.checksum = file->checksum;
    out.applied_by = lease.holder_id();
  } else {
    tx.execute("DELETE FROM " + t + " WHERE version = ?", {version});
    out.status = "retry";
  }
  tx.commit();
  lease.release();
  return out;
}

}  // namespace sqllock
