// Example: writes the database itself refuses once the writer's lease is gone. Two patterns:
// a guarded transaction (data only this lock's holder writes) and fenced writes (data that other
// processes or other lock names also write).
//   example_fenced_writes [URL]   (default sqlite:sqllock.db; run `sqllock migrate` first)
#include <sqllock/sqllock.hpp>

#include <chrono>
#include <iostream>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  const char* url = argc > 1 ? argv[1] : "sqlite:sqllock.db";
  try {
    auto client = sqllock::connect(url);
    {
      auto tx = client.begin();
      tx.execute("CREATE TABLE IF NOT EXISTS report (id BIGINT PRIMARY KEY, body TEXT, fence BIGINT)");
      tx.execute("DELETE FROM report WHERE id = 1");
      tx.execute("INSERT INTO report (id, body, fence) VALUES (1, 'none yet', NULL)");
      tx.commit();
    }
    auto lease = client.acquire_for("nightly-report", 10s, {.ttl = 30s});

    // 1. A guarded transaction: the write commits only while the lease is held. However long this
    //    process pauses between require_lease() and commit(), no other holder's takeover can commit
    //    in between; if the lease is already gone, require_lease() throws lease_lost and nothing is
    //    written.
    {
      auto tx = client.begin();
      tx.require_lease(lease);
      tx.execute("UPDATE report SET body = ? WHERE id = 1", {std::string("written under the lease")});
      tx.commit();
    }

    // 2. A fenced write: the row remembers the newest token that wrote it and refuses older ones,
    //    whoever the writer is (the token could come from $SQLLOCK_FENCE in a script, too).
    {
      auto tx = client.begin();
      auto r = tx.fenced_update({.table = "report",
                                 .key = {{"id", std::int64_t{1}}},
                                 .token = lease.fencing_token(),
                                 .set = {{"body", std::string("fenced write")}}});
      if (r.applied()) {
        std::cout << "written with token " << lease.fencing_token() << "\n";
      } else {
        std::cout << "refused: token " << r.fence << " has written since\n";
      }
      tx.commit();
    }
    lease.release();
  } catch (const sqllock::lease_lost& e) {
    std::cerr << "the lease was lost before the write: nothing written (" << e.what() << ")\n";
    return 1;
  } catch (const sqllock::error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
