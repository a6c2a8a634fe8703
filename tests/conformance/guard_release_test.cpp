// A release made while a transaction guarding the lease is open (transaction::require_lease) waits
// in the client's release outbox until that transaction ends: for every kind of hold, however the
// transaction ends, and also when the client is gone by then.
#include <optional>

#include "conformance/fixture.hpp"

using namespace std::chrono_literals;

namespace sqllock_test {
namespace {

enum class kind { lock, permit, read, write };
enum class ending { commit, rollback, exception };

const char* kind_name(kind k) {
  switch (k) {
    case kind::lock: return "lock";
    case kind::permit: return "permit";
    case kind::read: return "read hold";
    case kind::write: return "write hold";
  }
  return "?";
}

const char* ending_name(ending e) {
  switch (e) {
    case ending::commit: return "commit";
    case ending::rollback: return "rollback";
    case ending::exception: return "exception";
  }
  return "?";
}

std::optional<sqllock::lease_guard> hold(sqllock::client& c, kind k, const std::string& name,
                                         const sqllock::lease_options& o = {.ttl = 10s}) {
  switch (k) {
    case kind::lock: return c.try_acquire(name, o);
    case kind::permit: return c.try_acquire_permit(name, 1, o);
    case kind::read: return c.try_acquire_read(name, o);
    case kind::write: return c.try_acquire_write(name, o);
  }
  return std::nullopt;
}

// What the other client wants: the same lock or permit, the other side of a reader-writer lock.
std::optional<sqllock::lease_guard> other_side(sqllock::client& c, kind k, const std::string& name,
                                               std::chrono::milliseconds wait) {
  const sqllock::lease_options o{.ttl = 5s};
  switch (k) {
    case kind::lock: return c.try_acquire_for(name, wait, o);
    case kind::permit: return c.try_acquire_permit_for(name, 1, wait, o);
    case kind::read: return c.try_acquire_write_for(name, wait, o);
    case kind::write: return c.try_acquire_read_for(name, wait, o);
  }
  return std::nullopt;
}

}  // namespace

// Every kind of hold, released inside its guarded transaction: nobody comes in before the
// transaction ends, and the release is sent once it ends (commit, rollback, or the transaction
// destroyed by an exception), not left to the lease's TTL (10 s).
TEST(GuardedRelease, EveryKindOfHoldReleasedInsideItsGuardedTransactionIsSentWhenItEnds) {
  auto a = make_client();
  auto b = make_client();
  user_table t(b, {{1, 10}});
  std::int64_t expected = 10;
  for (const kind k : {kind::lock, kind::permit, kind::read, kind::write}) {
    for (const ending e : {ending::commit, ending::rollback, ending::exception}) {
      SCOPED_TRACE(std::string(kind_name(k)) + ", transaction ended by " + ending_name(e));
      const auto name = unique_name("guard_rel");
      auto h = hold(a, k, name);
      ASSERT_TRUE(h);
      try {
        auto tx = a.begin();
        tx.require_lease(*h);
        tx.execute("UPDATE " + t.name() + " SET qty = qty + 1 WHERE id = ?", {std::int64_t{1}});
        const auto t0 = clock::now();
        h->release();
        EXPECT_LT(ms_since(t0), 2000) << "the release waited for its own open transaction";
        EXPECT_FALSE(other_side(b, k, name, 0ms)) << "the other client came in while the guarded transaction was open";
        if (e == ending::commit) {
          tx.commit();
          ++expected;
        } else if (e == ending::rollback) {
          tx.rollback();
        } else {
          throw std::runtime_error("the application gives up");
        }
      } catch (const std::runtime_error&) {
      }
      const auto ended = clock::now();
      EXPECT_TRUE(other_side(b, k, name, 3s)) << "the release was not sent when the guarded transaction ended";
      EXPECT_LT(ms_since(ended), 3000);
      EXPECT_EQ(t.qty(1), expected);
    }
  }
}

// The client is destroyed (its guard released first, or released by the guard's destructor) while
// its guarded transaction is still open: the held-off release goes with the transaction's end, not
// with the client, so the name is free once the transaction ends, not only at the lease's TTL.
TEST(GuardedRelease, AHeldOffReleaseOutlivesItsClient) {
  auto b = make_client();
  user_table t(b, {{1, 10}});
  for (const bool explicit_release : {true, false}) {
    SCOPED_TRACE(explicit_release ? "released, then the client destroyed" : "guard and client destroyed");
    const auto name = unique_name("guard_rel_gone");
    std::optional<sqllock::transaction> tx;
    {
      auto a = make_client();
      auto h = a.try_acquire(name, {.ttl = 10s});
      ASSERT_TRUE(h);
      tx.emplace(a.begin());
      tx->require_lease(*h);
      tx->execute("UPDATE " + t.name() + " SET qty = qty + 1 WHERE id = ?", {std::int64_t{1}});
      if (explicit_release) h->release();
    }  // the guard (its release held off) and the client are gone
    // A plain read of the row: a live lease, whatever the answer of a try would be.
    const auto row = b.inspect(name);
    EXPECT_TRUE(row && row->time_left > 0ms) << "the name was freed while the guarded transaction was open";
    tx->commit();
    const auto t0 = clock::now();
    EXPECT_TRUE(b.try_acquire_for(name, 3s)) << "the held-off release was lost with its client";
    EXPECT_LT(ms_since(t0), 3000);
    tx.reset();
  }
  EXPECT_EQ(t.qty(1), 12);
}

// A re-entered lease (the same name twice in one scope, the inner hold with a shorter TTL) guarded
// through its inner hold: releasing the inner hold frees nothing, releasing the outer one is held
// off until the transaction ends; the guard of a write hold
// across a downgrade (a read hold taken by the writer, then the write hold released) keeps other
// readers out until the transaction ends.
TEST(GuardedRelease, ReenteredAndDowngradedHoldsReleasedInsideTheirGuardedTransaction) {
  auto a = make_client();
  auto b = make_client();
  user_table t(b, {{1, 10}});
  {
    SCOPED_TRACE("re-entered lock");
    const auto name = unique_name("guard_rel_reenter");
    auto outer = a.try_acquire(name, {.ttl = 10s});
    auto inner = a.try_acquire(name, {.ttl = 1s});
    ASSERT_TRUE(outer && inner);
    auto tx = a.begin();
    tx.require_lease(*inner);
    tx.execute("UPDATE " + t.name() + " SET qty = qty + 1 WHERE id = ?", {std::int64_t{1}});
    inner->release();
    outer->release();
    // A plain read of the row: a live lease, whatever the answer of a try would be.
    const auto row = b.inspect(name);
    EXPECT_TRUE(row && row->time_left > 0ms) << "the name was freed while the guarded transaction was open";
    tx.commit();
    EXPECT_TRUE(b.try_acquire_for(name, 3s)) << "the held-off release of the re-entered lease was not sent";
  }
  {
    SCOPED_TRACE("downgrade");
    const auto name = unique_name("guard_rel_down");
    auto w = a.try_acquire_write(name, {.ttl = 10s});
    ASSERT_TRUE(w);
    auto r = a.try_acquire_read(name, {.ttl = 10s});  // a downgrade: the writer takes the read side
    ASSERT_TRUE(r);
    auto tx = a.begin();
    tx.require_lease(*w);
    tx.execute("UPDATE " + t.name() + " SET qty = qty + 1 WHERE id = ?", {std::int64_t{1}});
    w->release();
    EXPECT_FALSE(b.try_acquire_read(name)) << "a reader came in while the write hold's guarded transaction was open";
    tx.commit();
    EXPECT_TRUE(b.try_acquire_read_for(name, 3s)) << "the downgraded write hold was not freed after the transaction";
    EXPECT_FALSE(b.try_acquire_write(name)) << "a writer came in beside the read hold";
  }
  EXPECT_EQ(t.qty(1), 12);
}

}  // namespace sqllock_test
