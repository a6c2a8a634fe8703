// `sqllock migrate`, `sqllock status` and `sqllock release --force`: schema and administration.
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "output_format.hpp"
#include "sqllock/client.hpp"
#include "sqllock/error.hpp"
#include "sqllock/migrations.hpp"
#include "sqllock/parse.hpp"

namespace sqllock_cli {

namespace {

// `migrate --dir DIR` (and --resolve / --retry): the user's migrations, after the lock tables.
int run_user_migrations(sqllock::client& client, const migrate_options& options) {
  sqllock::migrate_options o;
  o.history_table = options.history_table;
  o.wait = options.wait;
  o.lock_ttl = options.lock_ttl;
  o.fail_on_missing_files = options.fail_on_missing;
  try {
    if (options.resolve || options.retry) {
      const bool applied = options.resolve.has_value();
      const long long version = applied ? *options.resolve : *options.retry;
      sqllock::resolve_migration(
          client, options.dir, version,
          applied ? sqllock::migration_resolution::applied : sqllock::migration_resolution::retry, o);
      std::printf(applied ? "migration %lld recorded as applied (resolved)\n"
                          : "migration %lld forgotten; the next run applies it again\n",
                  version);
      return exit_code::ok;
    }
    const auto report = sqllock::migrate_directory(client, options.dir, o);
    for (const auto& missing : report.missing_files) {
      print_error("warning: applied migration " + missing + " has no file in " + options.dir);
    }
    for (const auto& m : report.applied) {
      std::printf("applied %s (%lld ms)\n", m.name.c_str(), static_cast<long long>(m.duration_ms));
    }
    std::printf("migrations at version %lld (%zu applied now) in %s\n", static_cast<long long>(report.current_version),
                report.applied.size(), options.dir.c_str());
    return exit_code::ok;
  } catch (const sqllock::migration_failed& e) {
    print_error(e.what());
    return exit_code::failure;
  } catch (const sqllock::acquire_timeout& e) {
    print_error(std::string("another migrator holds the migration lock: ") + e.what());
    return exit_code::not_acquired;
  } catch (const sqllock::lease_lost& e) {
    // The lease code of `run`: nothing past what this run reported applied was recorded.
    print_error(std::string("the migration lock was lost: ") + e.what());
    return exit_code::lease_lost;
  }
}

}  // namespace

int run_migrate(const common_options& common, const migrate_options& options) {
  const std::string url = resolve_url(common.url);
  std::string redacted = "(invalid URL)";
  try {
    redacted = checked_redacted_url(url);
    auto client_options = make_client_options(common);
    client_options.require_schema = false;
    sqllock::client client = sqllock::connect(url, client_options);
    const int before = client.schema_version();
    const int version = client.migrate();
    if (version == before) {
      std::printf("schema version %d (up to date) at %s\n", version, redacted.c_str());
    } else {
      std::printf("schema version %d (was %d) at %s\n", version, before, redacted.c_str());
    }
    if (!options.dir.empty()) {
      std::fflush(stdout);
      return run_user_migrations(client, options);
    }
    return exit_code::ok;
  } catch (...) {
    return report_exception(redacted);
  }
}

int run_status(const common_options& common, const status_options& options) {
  const std::string url = resolve_url(common.url);
  std::string redacted = "(invalid URL)";
  try {
    redacted = checked_redacted_url(url);
    if (report_missing_sqlite_file(url, redacted)) return exit_code::unavailable;
    auto client_options = make_client_options(common);
    client_options.read_only = true;  // SQLite: works on a read-only file or directory, creates nothing
    sqllock::client client = sqllock::connect(url, client_options);
    const auto locks = client.list_locks();
    const auto queue = client.list_queue();
    const std::string text = options.json ? locks_json(locks, queue) : locks_table(locks, queue);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return exit_code::ok;
  } catch (...) {
    return report_exception(redacted);
  }
}

int run_release(const common_options& common, const release_options& options) {
  const std::string url = resolve_url(common.url);
  std::string redacted = "(invalid URL)";
  try {
    redacted = checked_redacted_url(url);
    sqllock::validate_lock_name(options.name);
  } catch (...) {
    return report_exception(redacted);
  }
  if (!options.force) {
    print_error("release: refusing without --force: this frees '" + printable(options.name) +
                "' whoever holds it (its holder loses the lease); run `sqllock release --name NAME "
                "--force` if the lock is stuck");
    return exit_code::usage;
  }
  try {
    if (report_missing_sqlite_file(url, redacted)) return exit_code::unavailable;
    sqllock::client client = sqllock::connect(url, make_client_options(common));
    // Only to tell the operator whom they took it from; the release itself does not depend on it.
    const auto before = client.inspect(options.name);
    if (!client.force_release(options.name)) {
      // Not an error: the goal (the lock is free) holds, so scripts may run this unconditionally.
      std::printf("'%s' not held; nothing released\n", printable(options.name).c_str());
      return exit_code::ok;
    }
    if (before && before->holder.size() > 0) {
      std::printf("released '%s' (was held by '%s', fence %lld)\n", printable(options.name).c_str(),
                  printable(before->holder).c_str(), static_cast<long long>(before->fencing_token));
    } else {
      std::printf("released '%s'\n", printable(options.name).c_str());
    }
    return exit_code::ok;
  } catch (...) {
    return report_exception(redacted);
  }
}

}  // namespace sqllock_cli
