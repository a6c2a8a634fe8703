// `sqllock migrate`, `sqllock status` and `sqllock release --force`: schema and administration.
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "output_format.hpp"
#include "sqllock/client.hpp"
#include "sqllock/error.hpp"
#include "sqllock/parse.hpp"

namespace sqllock_cli {

int run_migrate(const common_options& common, const migrate_options& /*options*/) {
  const std::string url = resolve_url(common.url);
  std::string redacted = "(invalid URL)";
  try {
    redacted = checked_redacted_url(url);
    auto client_options = make_client_options(common);
    client_options.require_schema = false;
    sqllock::client client = sqllock::connect(url, client_options);
    const int before = client.schema_version();
    const int version = client.migrate();
    // A later `--dir DIR` applies the user's migrations here, after the lock tables'.
    if (version == before) {
      std::printf("schema version %d (up to date) at %s\n", version, redacted.c_str());
    } else {
      std::printf("schema version %d (was %d) at %s\n", version, before, redacted.c_str());
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
    sqllock::client client = sqllock::connect(url, make_client_options(common));
    const auto locks = client.list_locks();
    const std::string text = options.json ? locks_json(locks) : locks_table(locks);
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
