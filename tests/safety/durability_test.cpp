// Safety: sqllock refuses servers that flush lazily, or makes its own statements durable (issue 10
// items 6 and 7).
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "safety/safety_fixture.hpp"

using namespace std::chrono_literals;
using namespace sqllock_safety;

#if SQLLOCK_SAFETY_SQLITE
// Count the syncs of SQLite's write-ahead log: these definitions take the place of libc's for the
// whole program (libsqlite3 included) and pass every call on.
namespace {
std::atomic<int> wal_syncs{0};

bool is_wal(int fd) {
  char link[64], path[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, path, sizeof path - 1);
  if (n <= 4) return false;
  path[n] = '\0';
  return std::string(path).ends_with("-wal");
}
}  // namespace

extern "C" int fdatasync(int fd) {
  static auto real = reinterpret_cast<int (*)(int)>(dlsym(RTLD_NEXT, "fdatasync"));
  if (is_wal(fd)) ++wal_syncs;
  return real(fd);
}

extern "C" int fsync(int fd) {
  static auto real = reinterpret_cast<int (*)(int)>(dlsym(RTLD_NEXT, "fsync"));
  if (is_wal(fd)) ++wal_syncs;
  return real(fd);
}

// Item 7: in WAL mode with synchronous = NORMAL, an acquisition's frames were written but not
// synced before the caller was told: a power cut while CMD ran could roll it back and hand its token
// out again. Every acknowledged lease statement must have synced the log.
TEST(Durability, EverySqliteLeaseStatementIsSyncedBeforeItReturns) {
  auto c = make_client();
  for (int i = 0; i < 5; ++i) {
    const auto name = unique_name("synced");
    const int before_acquire = wal_syncs.load();
    auto g = c.try_acquire(name, {.ttl = 30s, .auto_renew = false});
    ASSERT_TRUE(g);
    EXPECT_GT(wal_syncs.load(), before_acquire) << "the acquisition was acknowledged before it was on disk";
    const int before_release = wal_syncs.load();
    g->release();
    EXPECT_GT(wal_syncs.load(), before_release) << "the release was acknowledged before it was on disk";
  }
}
#endif

#if SQLLOCK_SAFETY_MYSQL
// Item 6: with innodb_flush_log_at_trx_commit = 2, holder A used fence 2 and, after a kill -9 of
// the server, holder B got fence 2 too. sqllock refuses such a server unless told to accept it.
TEST(Durability, ALazyInnodbFlushIsRefusedUnlessAccepted) {
  struct restore {
    ~restore() { hooks().admin("SET GLOBAL innodb_flush_log_at_trx_commit = 1"); }
  } restore_setting;
  for (int setting : {0, 2}) {
    hooks().admin("SET GLOBAL innodb_flush_log_at_trx_commit = " + std::to_string(setting));
    try {
      make_client();
      ADD_FAILURE() << "connected to a server with innodb_flush_log_at_trx_commit = " << setting;
    } catch (const sqllock::database_error& e) {
      EXPECT_NE(std::string(e.what()).find("innodb_flush_log_at_trx_commit = " + std::to_string(setting)),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("allow_unsafe_durability"), std::string::npos) << e.what();
    }
    auto accepted = make_client({.allow_unsafe_durability = true});
    EXPECT_TRUE(accepted.try_acquire(unique_name("accepted_risk")));
  }
}
#endif

#if SQLLOCK_SAFETY_POSTGRESQL
// The PostgreSQL equivalent: with fsync = off nothing is durable; sqllock refuses unless accepted.
TEST(Durability, PostgresqlWithoutFsyncIsRefusedUnlessAccepted) {
  struct restore {
    ~restore() {
      hooks().admin("ALTER SYSTEM RESET fsync");
      hooks().admin("SELECT pg_reload_conf()");
    }
  } restore_setting;
  hooks().admin("ALTER SYSTEM SET fsync = off");
  hooks().admin("SELECT pg_reload_conf()");
  std::this_thread::sleep_for(200ms);  // the reload is asynchronous
  try {
    make_client();
    ADD_FAILURE() << "connected to a server with fsync = off";
  } catch (const sqllock::database_error& e) {
    EXPECT_NE(std::string(e.what()).find("fsync = off"), std::string::npos) << e.what();
  }
  auto accepted = make_client({.allow_unsafe_durability = true});
  EXPECT_TRUE(accepted.try_acquire(unique_name("accepted_risk")));
}
#endif
