// Reproducer: transaction::commit() must throw when the server connection died before COMMIT.
//
//   repro_commit_lost URL ADMIN_URL
//
// Begins a transaction, inserts a row, has the admin connection kill the transaction's server
// connection (PostgreSQL pg_terminate_backend, MariaDB KILL CONNECTION), then commits. The row is
// not in the database afterwards, so commit() must throw (connection_lost); returning normally
// tells the caller a write was durable when it was not. Exit 0 = correct, 1 = bug, 2 = setup error.
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "sqllock/sqllock.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: repro_commit_lost URL ADMIN_URL\n";
    return 2;
  }
  const std::string url = argv[1];
  const bool mysql = url.starts_with("mysql:");
  const std::string table = "repro_commit_lost_" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000);
  try {
    auto c = sqllock::connect(url, {.require_schema = false});
    auto admin = sqllock::connect(argv[2], {.require_schema = false});
    {
      auto tx = c.begin();
      tx.execute("CREATE TABLE " + table + " (id INT PRIMARY KEY)");
      tx.commit();
    }
    auto tx = c.begin();
    tx.execute("INSERT INTO " + table + " (id) VALUES (1)");
    const std::string id =
        tx.query(mysql ? "SELECT CONNECTION_ID()" : "SELECT pg_backend_pid()").at(0).as_text(0);
    {
      auto kill = admin.begin();
      if (mysql) {
        kill.execute("KILL CONNECTION " + id);
      } else {
        kill.query("SELECT pg_terminate_backend(" + id + ")");
      }
      kill.commit();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::string outcome;
    try {
      tx.commit();
      outcome = "commit() returned normally";
    } catch (const sqllock::error& e) {
      outcome = std::string("commit() threw: ") + e.what();
    }
    std::cout << outcome << '\n';
    auto fresh = sqllock::connect(url, {.require_schema = false});  // c's pool may hold the dead connection
    auto check = fresh.begin();
    auto rows = check.query("SELECT COUNT(*) FROM " + table).at(0).as_int(0);
    check.execute("DROP TABLE " + table);
    check.commit();
    std::cout << "rows in the table afterwards: " << rows << '\n';
    if (rows == 0 && outcome.starts_with("commit() returned")) {
      std::cout << "BUG: commit() reported success for a transaction the server rolled back\n";
      return 1;
    }
    std::cout << "OK\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "repro_commit_lost: setup failed: " << e.what() << '\n';
    return 2;
  }
}
