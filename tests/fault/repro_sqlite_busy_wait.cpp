// Reproducer: on SQLite, try_acquire_for(1 s) waits ~5 s (the busy timeout) while another connection writes.
//
//   repro_sqlite_busy_wait sqlite:/tmp/x.db
//
// One connection holds the database's write lock (an open transaction that has written, as a
// process paused mid-transaction would); a lease acquisition bounded to 1 s must come back within
// about 1 s (not acquired, or an error), not after SQLite's 5 s busy timeout.
// Exit 0 = returned within 2 s, 1 = overran the bound, 2 = setup error.
#include <chrono>
#include <iostream>
#include <string>

#include "sqllock/sqllock.hpp"

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  if (argc != 2) {
    std::cerr << "usage: repro_sqlite_busy_wait sqlite:PATH\n";
    return 2;
  }
  try {
    auto writer = sqllock::connect(argv[1], {.require_schema = false});
    writer.migrate();
    auto locker = sqllock::connect(argv[1]);
    auto tx = writer.begin();
    tx.execute("CREATE TABLE IF NOT EXISTS repro_busy (x INTEGER)");
    tx.execute("INSERT INTO repro_busy (x) VALUES (1)");  // the write lock is now held until commit
    auto t0 = std::chrono::steady_clock::now();
    std::string outcome;
    try {
      auto g = locker.try_acquire_for("repro-busy", 1s);
      outcome = g ? "acquired" : "not acquired";
    } catch (const sqllock::error& e) {
      outcome = std::string("threw: ") + e.what();
    }
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    tx.rollback();
    std::cout << "try_acquire_for(1s) with the write lock held elsewhere: " << outcome << " after " << ms << " ms\n";
    if (ms > 2000) {
      std::cout << "BUG: the wait bound was not honoured (SQLite busy timeout instead)\n";
      return 1;
    }
    std::cout << "OK\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "repro_sqlite_busy_wait: setup failed: " << e.what() << '\n';
    return 2;
  }
}
