// Example: apply an application's schema migrations from one instance at a time, on any backend.
//   example_migrate_schema URL DIR [--resolve VERSION]
// DIR holds 0001_name.sql, 0002_name.sql, ...; run it from every instance at start-up: the first
// applies what is pending under a lease lock, the others wait for it and then find nothing to do.
#include <sqllock/migrations.hpp>
#include <sqllock/sqllock.hpp>

#include <chrono>
#include <cstring>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  if (argc != 3 && !(argc == 5 && std::strcmp(argv[3], "--resolve") == 0)) {
    std::cerr << "usage: example_migrate_schema URL DIR [--resolve VERSION]\n";
    return 64;
  }
  try {
    sqllock::client_options options;
    options.require_schema = false;  // migrate_directory creates the lock tables if needed
    options.log = [](sqllock::log_level level, std::string_view msg) {
      if (level >= sqllock::log_level::warning) std::cerr << "sqllock: " << msg << "\n";
    };
    auto client = sqllock::connect(argv[1], options);
    sqllock::migrate_options migrate;
    migrate.wait = 5min;     // another instance may be migrating: wait for it
    migrate.lock_ttl = 30s;  // if this process dies, the next one proceeds at most 30 s later
    migrate.on_start = [](std::int64_t, const std::string& file) { std::cout << "applying " << file << "\n"; };
    if (argc == 5) {  // MySQL only: after fixing the schema by hand
      auto rec = sqllock::resolve_migration(client, argv[2], std::stoll(argv[4]),
                                            sqllock::migration_resolution::applied, migrate);
      std::cout << rec.name << " recorded as resolved\n";
      return 0;
    }
    auto report = sqllock::migrate_directory(client, argv[2], migrate);
    for (const auto& m : report.applied) std::cout << "applied " << m.name << " in " << m.duration_ms << " ms\n";
    for (const auto& f : report.missing_files) std::cerr << "warning: applied " << f << " has no file any more\n";
    std::cout << "schema at version " << report.current_version << "\n";
  } catch (const sqllock::checksum_mismatch& e) {
    std::cerr << "refusing: " << e.what() << "\n";  // someone edited an applied migration
    return 1;
  } catch (const sqllock::migration_failed& e) {
    std::cerr << "migration failed: " << e.what() << "\n";
    return 1;
  } catch (const sqllock::error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
