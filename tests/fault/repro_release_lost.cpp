// Reproducer: after a release that failed with connection_lost, the next acquisition reuses the token.
//
//   repro_release_lost URL ADMIN_URL     (a throwaway server: it locks the URL's user out briefly)
//
// 1. acquire NAME (TTL 30 s): token T, hold count 1
// 2. the admin locks the application user out and ends its connections (PostgreSQL: CONNECTION
//    LIMIT 0 on the database + pg_terminate_backend; MariaDB: ACCOUNT LOCK + KILL)
// 3. release() fails with connection_lost (the row still says: held by us, token T)
// 4. the admin lets the user in again
// 5. the same thread acquires NAME again: a new acquisition after a release, so the contract wants
//    a token > T and hold count 1; the library re-enters the stale row instead (token T, count 2),
//    and the stale hold never goes away (the lock stays held after this guard's release, until TTL).
// Exit 0 = correct, 1 = bug, 2 = setup error.
#include <chrono>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>

#include "sqllock/sqllock.hpp"

namespace {

void admin_sql(sqllock::client& admin, const std::string& sql, bool rows) {
  auto tx = admin.begin();
  if (rows) {
    tx.query(sql);
  } else {
    tx.execute(sql);
  }
  tx.commit();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  if (argc != 3) {
    std::cerr << "usage: repro_release_lost URL ADMIN_URL\n";
    return 2;
  }
  const std::string url = argv[1];
  const auto u = sqllock::parse_url(url);
  const bool mysql = u.scheme == sqllock::database_url::kind::mysql;
  const std::string name = "repro-release-lost-" + std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  try {
    auto admin = sqllock::connect(argv[2], {.require_schema = false});
    auto c = sqllock::connect(url);
    sqllock::lease_options o;
    o.ttl = 30s;
    auto g = c.try_acquire(name, o);
    if (!g) throw std::runtime_error("first acquire failed");
    const auto token = g->fencing_token();
    std::cout << "1. acquired token " << token << ", hold count " << g->hold_count() << '\n';

    if (mysql) {
      admin_sql(admin, "ALTER USER '" + u.user + "'@'%' ACCOUNT LOCK", false);
      admin_sql(admin, "ALTER USER '" + u.user + "'@'localhost' ACCOUNT LOCK", false);
      auto tx = admin.begin();
      auto ids = tx.query("SELECT id FROM information_schema.processlist WHERE user = ?", {u.user});
      tx.commit();
      for (const auto& r : ids) {
        try {
          admin_sql(admin, "KILL CONNECTION " + r.as_text(0), false);
        } catch (const sqllock::error&) {
        }
      }
    } else {
      admin_sql(admin, "ALTER DATABASE \"" + u.database + "\" CONNECTION LIMIT 0", false);
      admin_sql(admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '" + u.user +
                           "' AND pid <> pg_backend_pid()", true);
    }
    std::string outcome = "returned normally";
    try {
      g->release();
    } catch (const sqllock::error& e) {
      outcome = std::string("threw: ") + e.what();
    }
    std::cout << "3. release() with the server unreachable " << outcome << '\n';
    if (mysql) {
      admin_sql(admin, "ALTER USER '" + u.user + "'@'%' ACCOUNT UNLOCK", false);
      admin_sql(admin, "ALTER USER '" + u.user + "'@'localhost' ACCOUNT UNLOCK", false);
    } else {
      admin_sql(admin, "ALTER DATABASE \"" + u.database + "\" CONNECTION LIMIT -1", false);
    }

    std::optional<sqllock::lease_guard> g2;
    for (int i = 0; i < 50 && !g2; ++i) {
      try {
        g2 = c.try_acquire(name, o);
      } catch (const sqllock::connection_lost&) {
      }
    }
    if (!g2) throw std::runtime_error("second acquire failed");
    const auto token2 = g2->fencing_token();
    const auto count2 = g2->hold_count();
    std::cout << "5. acquired again: token " << token2 << ", hold count " << count2 << '\n';
    g2->release();
    auto info = c.inspect(name);
    std::cout << "   after releasing it: " << (info ? "still held by " + info->holder : std::string("free")) << '\n';
    c.force_release(name);
    if (token2 <= token) {
      std::cout << "BUG: a new acquisition after a (failed) release got the old token back (hold count "
                << count2 << ")\n";
      return 1;
    }
    std::cout << "OK\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "repro_release_lost: setup failed: " << e.what() << '\n';
    return 2;
  }
}
