// The sqllock command's subcommands, their options and the exit codes they share.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "sqllock/client.hpp"

namespace sqllock_cli {

/// Exit codes (sysexits.h values where the contract names them). `run` otherwise exits with CMD's code.
namespace exit_code {
inline constexpr int ok = 0;
inline constexpr int failure = 1;        ///< an error outside the contract's cases
inline constexpr int usage = 64;         ///< EX_USAGE: bad flag, duration, name or URL
inline constexpr int unavailable = 69;   ///< EX_UNAVAILABLE: database unreachable or schema missing
inline constexpr int software = 70;      ///< EX_SOFTWARE: an unexpected internal error
inline constexpr int io_error = 74;      ///< EX_IOERR: our own output could not be written
inline constexpr int not_acquired = 75;  ///< EX_TEMPFAIL: lock not acquired within --wait
inline constexpr int lease_lost = 76;    ///< the lease was lost while CMD ran
inline constexpr int cannot_execute = 126;
inline constexpr int command_not_found = 127;
}  // namespace exit_code

/// Options every subcommand takes.
struct common_options {
  std::string url;  ///< --url, else $SQLLOCK_URL, else sqlite:sqllock.db (resolved by resolve_url)
  int verbosity = 0;
  /// Options of the library's own; each also rides on the URL as a sqllock_ parameter, which wins.
  std::string table;                     ///< --table (empty: the library's default, sqllock_locks)
  bool no_notifications = false;         ///< --no-notifications: poll instead of LISTEN/NOTIFY, GET_LOCK
  bool no_prepared_statements = false;   ///< --no-prepared-statements (PgBouncer in transaction mode)
  bool allow_unsafe_durability = false;  ///< --allow-unsafe-durability
};

struct migrate_options {
  /// --dir: the user's migrations (NNNN_name.sql), applied after the lock tables'.
  std::string dir;
  std::string history_table = "sqllock_migrations";
  std::chrono::milliseconds wait{std::chrono::minutes(5)};
  std::chrono::milliseconds lock_ttl{std::chrono::seconds(30)};
  std::optional<long long> resolve;  ///< --resolve VERSION: record a failed migration as applied
  std::optional<long long> retry;    ///< --retry VERSION: forget a failed migration to apply it again
  bool fail_on_missing = false;
};

struct run_options {
  /// --name, repeatable: one name is a plain lease lock, several a multi-lock (all or nothing,
  /// taken in sorted order within one --wait); duplicates count once, kept in the order given.
  std::vector<std::string> names;
  std::chrono::milliseconds ttl{30000};
  std::chrono::milliseconds wait{0};
  std::chrono::milliseconds grace{10000};
  /// --max-hold: CMD is stopped (SIGTERM, SIGKILL after --grace) this long after the acquisition,
  /// like a lost lease (exit 76), and the lock released. Zero: no bound.
  std::chrono::milliseconds max_hold{0};
  /// --min-hold: a release earlier than this after the acquisition leaves the lock held until then.
  std::chrono::milliseconds min_hold{0};
  std::optional<std::string> holder;
  /// `--permits N`: NAME is a counting semaphore of N permits; take one of them.
  std::optional<int> permits;
  /// --fair: wait in the name's fair queue (lease_options::fair).
  bool fair = false;
  /// `--shared` / `--exclusive`: take the read / write lock of NAME's reader-writer lease instead of
  /// the plain lock NAME (which they never share a row with: mixing the two on one name is refused).
  enum class rw_mode { none, shared, exclusive };
  rw_mode rw = rw_mode::none;
  std::vector<std::string> command;
};

struct status_options {
  bool json = false;
};

struct release_options {
  std::string name;
  bool force = false;
};

/// The URL to use: `--url` if given, else $SQLLOCK_URL, else "sqlite:sqllock.db".
std::string resolve_url(const std::string& flag_value);

/// Client options with the log callback writing warnings and errors (and more with -v) to stderr.
sqllock::client_options make_client_options(const common_options& common);

/// Parse and check the URL, returning its redacted form (safe to print). Throws invalid_argument.
std::string checked_redacted_url(const std::string& url);

/// Print "sqllock: <message>" to stderr as one write.
void print_error(const std::string& message);

int run_migrate(const common_options& common, const migrate_options& options);
int run_run(const common_options& common, const run_options& options);
int run_status(const common_options& common, const status_options& options);
int run_release(const common_options& common, const release_options& options);

/// SQLite: when the URL names a database file that does not exist, say so (with the migrate
/// command that creates it) and return true. Commands other than migrate never create the file.
bool report_missing_sqlite_file(const std::string& url, const std::string& redacted_url);

/// Map an exception from the library to a message on stderr and the exit code the contract gives
/// it (64 bad input, 69 unreachable / schema missing / other database errors, 70 otherwise).
int report_exception(const std::string& redacted_url);

}  // namespace sqllock_cli
