// The backend seam: the handful of operations the lease engine and transactions need from a database.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sqllock/client.hpp"
#include "sqllock/error.hpp"
#include "sqllock/parse.hpp"
#include "sqllock/transaction.hpp"
#include "sqllock/value.hpp"

namespace sqllock::detail {

using steady = std::chrono::steady_clock;

/// One acquisition as the lock table knows it. `owner` is chosen by the client for one acquire
/// call and never reused by anyone (a random client id plus a sequence number), so (name, owner)
/// names one acquisition for good: a statement re-sent after a lost answer can only ever match the
/// acquisition it was meant for. `token` is its fencing token, 0 when not known (an acquire whose
/// answer was lost).
struct lease_ref {
  std::string name;
  std::string owner;
  std::int64_t token = 0;
};

/// The one-statement acquire.
struct acquire_request {
  std::string name;
  std::string holder;  ///< the client's label, shown in status (not an identity)
  std::string owner;   ///< unique to this acquire call (see lease_ref)
  std::chrono::milliseconds ttl{0};
  /// No answer by then: the backend gives up (closing the connection) and throws connection_lost;
  /// the statement may or may not have committed.
  steady::time_point deadline;
  /// A reader-writer row (rw_name.hpp): the name's fence row. Not empty: a new acquisition's token
  /// is the fence row's token after the same statement or transaction advanced it by one (locking
  /// the fence row before the lease row), so readers and writers of a name share one increasing
  /// sequence. A fence row that does not exist yet starts above every token in
  /// [fence_lo, fence_hi) (the name's rows from before it). Empty: token + 1 of the row itself.
  std::string fence{};
  std::string fence_lo{}, fence_hi{};
  /// The backend waits for its callers' lane (the connection other threads of this client are
  /// using) only until then (and never past `deadline`); still busy: not acquired, nothing sent. The
  /// engine sets it well before `deadline`, so that a statement never starts with a sliver of its
  /// budget left (a connect or a round trip given a millisecond fails as if the server were gone).
  steady::time_point lane_deadline = steady::time_point::max();
  steady::time_point lane_until() const noexcept { return std::min(lane_deadline, deadline); }
  /// A fair waiter's acquire (lease_options::fair). MySQL: the wake-up lock beside the lease is
  /// worth a short wait when another client's waiter holds it for an instant (see mysql_backend).
  bool fair = false;
  /// A single try (no wait): a row lock held by another transaction (the live holder's guarded
  /// transaction, transaction::require_lease) is not waited for; the answer is "not acquired" at
  /// once, with the row's holder when it reads one. Backends whose upsert waits for such a lock
  /// honour it (MariaDB); the others never wait for a live holder's guard.
  bool no_lock_wait = false;
};

/// What the acquire statement found.
/// - The row was free, expired, or already this very owner's live acquisition (a retry of the same
///   acquire call after a lost answer): acquired, with the token (a new acquisition: the previous
///   token + 1, or the advanced fence of a reader-writer row; the same owner's live row: its token
///   unchanged).
/// - Someone else holds a live lease: not acquired, with their label and time left.
/// The lock table keeps no hold counts: re-entry is the client's bookkeeping, never the database's.
struct acquire_outcome {
  bool acquired = false;
  std::int64_t token = 0;
  std::string holder;                      ///< not acquired: who holds it ("" if unknown)
  std::chrono::milliseconds time_left{0};  ///< not acquired: their time left (database clock)
  /// When the backend took its lane and began (connecting if needed, then the statement): the
  /// database computes the expiry later than this, so the lease's local clock may start here
  /// instead of before the wait for the lane. Unset (the epoch): the caller's own start.
  steady::time_point started{};
};

/// One lease in a renewal batch. A batch never holds two items of the same name (a client holds at
/// most one live acquisition per name), so a backend need not de-duplicate.
struct renew_item {
  lease_ref lease;
  std::chrono::milliseconds ttl{0};
};

/// An owner-checked release of one acquisition (it has no hold counts: one release frees it).
struct release_request {
  lease_ref lease;
  /// ShedLock's lockAtLeastFor: if the lease was acquired less than this long ago (database
  /// clock), it is not freed but shortened to end at acquired_at + min_hold. Zero: free it now.
  std::chrono::milliseconds min_hold{0};
  steady::time_point deadline;
  /// A fair lease (schema version 4), min_hold zero: the same statement hands the row to the lowest
  /// live ticket of another owner (token + 1, a lease of that ticket's TTL) instead of freeing it,
  /// and deletes this owner's ticket whatever the owner check says.
  bool hand_over = false;
};

/// A fair waiter's poll (schema version 4): take its ticket in the name's queue, or push the
/// ticket's expiry to now + ttl (a waiter that stops polling loses its place after ttl).
struct queue_request {
  std::string name;
  std::string holder;  ///< the client's label
  std::string owner;   ///< the acquire call's owner id (one ticket per owner)
  std::chrono::milliseconds ttl{0};
  steady::time_point deadline;
  /// The ticket's seq from an earlier poll (0 on the first: the backend also prunes then).
  std::int64_t seq = 0;
  /// Renew the ticket (a write). False: only read where the waiter stands (no write, no commit
  /// flush), for a wake-up between renewals; an answer with seq 0 means the ticket is gone.
  bool refresh = true;
  /// How long the backend may wait for its callers' lane (as for an acquire): still busy then, it
  /// sends nothing and answers seq 0 (the waiter polls again soon), so a poll never starts with a
  /// sliver of its budget that no round trip could meet.
  steady::time_point lane_deadline = steady::time_point::max();
  steady::time_point lane_until() const noexcept { return std::min(lane_deadline, deadline); }
};

/// Where a fair waiter stands after its poll.
struct queue_outcome {
  std::int64_t seq = 0;    ///< its ticket's sequence number (increasing per name); 0 when unknown
  std::int64_t ahead = 0;  ///< live tickets ahead of it, the live holder's own ticket not counted
  bool mine = false;       ///< the lock row is already this owner's live lease (handed over)
  /// When `mine` and the backend reads them (handed_lease_from_poll()): the handed-over lease's
  /// token and its time left (database clock, at the read). Token 0: not read (the caller acquires).
  std::int64_t token = 0;
  std::chrono::milliseconds time_left{0};
};

/// One live ticket of a fair queue (not its holder's), for status.
struct queue_waiter {
  std::string name;
  std::string holder;
  std::int64_t seq = 0;
  std::chrono::milliseconds waited{0};     ///< since the ticket was taken (database clock)
  std::chrono::milliseconds time_left{0};  ///< until the ticket expires unless polled again
};

/// Result of a release: true when the owner check passed (the row was this acquisition's and is now
/// free, or kept until min_hold); false when the row names another acquisition or none.
using release_outcome = bool;

/// A release that found its lease's row locked by an open transaction (a guard of
/// transaction::require_lease whose end the client cannot see: an adopted connection's
/// transaction, a COMMIT whose answer was lost): nothing was changed; sent again shortly, like a
/// release that could not take its row lock in time.
class release_guarded : public lock_not_available {
 public:
  using lock_not_available::lock_not_available;
};

/// Which connection a lease statement runs on. The watchdog's renewals and re-sent releases run on a
/// connection of their own, so they never wait behind callers' statements (a slow inspect(), a
/// herd of try_acquire loops); callers share one connection in FIFO order.
enum class lane { caller, watchdog };

/// One transaction on one connection. Statements use `?` placeholders (the PostgreSQL backend
/// rewrites them to $n outside quotes). Every method maps driver errors through the backend's one
/// error-mapping function.
class session {
 public:
  virtual ~session() = default;
  virtual void commit() = 0;
  /// Must not throw; reports problems to the log it was given.
  virtual void rollback() noexcept = 0;
  virtual std::int64_t execute(std::string_view sql, const std::vector<value>& params) = 0;
  virtual result_rows query(std::string_view sql, const std::vector<value>& params) = 0;
  virtual cas_result cas(const cas_request& request) = 0;
  virtual row_lock_result lock_rows(const row_lock_request& request) = 0;
  /// The guard of transaction::require_lease: true when the row of `lease` in `table` names its
  /// owner and token and has not expired (database clock), and then it stays locked in share mode
  /// until the transaction ends.
  virtual bool require_lease(std::string_view table, const lease_ref& lease) = 0;
  virtual fenced_update_result fenced_update(const fenced_update_request& request) = 0;
};

/// Where a backend reports "this name may have been released" events (notification, file lock).
class wake_sink {
 public:
  virtual ~wake_sink() = default;
  virtual void wake(const std::string& name) noexcept = 0;
};

/// Backend construction parameters shared by every backend.
struct backend_config {
  database_url url;        ///< without the sqllock_ parameters (they are in options)
  client_options options;  ///< table name, notifications, prepared statements, durability, log
};

/// A lock database. Every method may be called from several threads at once: user threads on
/// lane::caller and the engine's watchdog thread on lane::watchdog. Lease statements never block
/// past their deadline: a backend that gets no answer in time closes that connection and throws
/// connection_lost (the next call reconnects). A backend never retries a statement whose outcome it
/// does not know; the engine decides (every lease statement is safe to re-send: see lease_ref).
///
/// What a new backend must implement: the lease statements below (one statement each, or one short
/// transaction where the dialect forces it), schema_version/migrate, begin() returning a session,
/// and optionally wake-ups. `src/fake/` is a complete in-memory example that the engine's unit
/// tests run against.
class backend {
 public:
  virtual ~backend() = default;

  /// The SQL dialect of this database.
  virtual sqllock::dialect dialect() const noexcept = 0;
  /// "sqlite", "postgresql" or "mysql" (for messages).
  std::string_view kind() const noexcept;

  // Schema.
  virtual int schema_version() = 0;
  virtual int migrate() = 0;

  // Lease statements (lane::caller unless stated).
  virtual acquire_outcome acquire(const acquire_request& request) = 0;
  /// Renew a batch (lane::watchdog) in as few statements as the dialect allows: extend each lease
  /// whose name, owner and token match and that has not expired, to at least now + ttl (never
  /// shortening it). Returns the indices of the items that passed; the others are lost.
  virtual std::vector<std::size_t> renew(std::span<const renew_item> items, steady::time_point deadline) = 0;
  virtual release_outcome release(const release_request& request, lane on) = 0;
  /// Free a lock whoever holds it (fencing sequence kept). False if it was not held.
  virtual bool force_release(const std::string& name) = 0;
  /// The row of one name, if it has a holder (live or expired). Bounded by `deadline`: the caller
  /// lane is waited for until caller_lane_until(deadline), the statement until `deadline`; either
  /// missed throws connection_lost (so do live_in_range and the *_after_guards reads).
  virtual std::optional<lock_info> inspect(const std::string& name, steady::time_point deadline) = 0;
  /// inspect() of a reader-writer lease's writer row by a reader that has stored its own row: a
  /// locking read that waits for a transaction guarding the writer row (transaction::require_lease)
  /// to end (`mode` lock_wait::wait), so that the guarded write commits before any reader comes in;
  /// with lock_wait::nowait it throws lock_not_available at once instead of waiting for any row
  /// lock (a guard's, a renewal's, another reader's check). The default reads plainly, for a
  /// backend whose guarded transaction already holds off the reader's row (SQLite: the guard's
  /// transaction holds the database's one write lock).
  virtual std::optional<lock_info> inspect_writer_after_guards(const std::string& name, lock_wait mode,
                                                               steady::time_point deadline) {
    (void)mode;
    return inspect(name, deadline);
  }
  /// Whether inspect_writer_after_guards() is a locking read (it may wait for a guarded
  /// transaction): the engine then sends it with lock_wait::nowait first, and on a locked row it
  /// reads plainly, stepping aside beside a live writer without waiting for that writer's
  /// transactions, and waits with lock_wait::wait only when no writer is live.
  virtual bool guards_hold_off_readers() const noexcept { return false; }
  /// Every lock with a live lease, ordered by name.
  virtual std::vector<lock_info> list_locks() = 0;
  /// The live lease whose name is in [lo, hi) (bytewise) that ends last, if any: one statement on
  /// the caller lane, in a fresh snapshot (it sees every acquisition committed before it started).
  /// The readers of a reader-writer lease are such a range (see rw_name.hpp).
  virtual std::optional<lock_info> live_in_range(const std::string& lo, const std::string& hi,
                                                 steady::time_point deadline) = 0;
  /// live_in_range() by a reader-writer writer: a locking read of every reader row of [lo, hi) that
  /// names a holder (live or expired) that waits for any transaction guarding one of them
  /// (transaction::require_lease on a read hold) to end (`mode` lock_wait::wait), so that the
  /// guarded transaction commits before the writer comes in; with lock_wait::nowait it throws
  /// lock_not_available at once on a locked row. Sent as inspect_writer_after_guards() is (nowait
  /// first; on a locked row a plain live_in_range(), and the waiting read only when no reader is
  /// live), only where guards_hold_off_readers(); the default reads plainly (SQLite).
  virtual std::optional<lock_info> live_in_range_after_guards(const std::string& lo, const std::string& hi,
                                                              lock_wait mode, steady::time_point deadline) {
    (void)mode;
    return live_in_range(lo, hi, deadline);
  }
  /// The number of permits stored for semaphore `name` (schema version 3): stores `permits` when the
  /// name has none yet (first use), and returns what is stored either way (two short statements);
  /// 0 when none is stored and this client cannot store one (read-only). std::nullopt when the
  /// count could not be stored because another connection held the write lock it needs past
  /// `deadline` (SQLite: any write transaction; nothing was stored, the caller may try again), or
  /// because this client's caller lane stayed busy for the first half of the time to `deadline`
  /// (caller_lane_until; nothing was sent). Its statements are bounded by `deadline`.
  virtual std::optional<int> semaphore_permits(const std::string& name, int permits, steady::time_point deadline) = 0;

  // Fair queue (schema version 4; lane::caller). A backend without it refuses fair acquires.
  virtual queue_outcome queue_poll(const queue_request& request) {
    (void)request;
    throw invalid_argument(std::string(kind()) + ": fair acquires are not supported");
  }
  /// A read-only poll (queue_request::refresh false) that finds the lock row handed to the waiter
  /// answers its token and time left, and the backend needs nothing more to count it as held: the
  /// engine may then start the lease from that read, committing nothing (the hand-over committed
  /// the token), and extend it to its own TTL by a renewal. False: the waiter sends its acquire.
  virtual bool handed_lease_from_poll() const noexcept { return false; }
  /// Delete this owner's ticket, if any.
  virtual void queue_leave(const std::string& owner, steady::time_point deadline) {
    (void)owner;
    (void)deadline;
  }
  /// The live tickets of every name that are not their lock's holder, by name then seq.
  virtual std::vector<queue_waiter> list_queue() { return {}; }

  // Transactions.
  virtual std::unique_ptr<session> begin(const transaction_options& options) = 0;

  // Wake-ups. The engine calls watch() when a local waiter starts waiting on a name and unwatch()
  // when the last one stops; the backend calls sink->wake(name) when it learns the name may have
  // been released by another client. watch() returns false when it cannot deliver events for the
  // name (the engine then polls faster). watch() returns by `until` (the waiter's deadline)
  // whatever I/O it needs; what it could not do by then is left to the backend's own thread.
  // Default: no events.
  virtual void set_wake_sink(wake_sink* sink) { (void)sink; }
  virtual bool watch(const std::string& name, steady::time_point until) {
    (void)name;
    (void)until;
    return false;
  }
  virtual void unwatch(const std::string& name) { (void)name; }

  /// Whether this lease's own renewals go on while a transaction guards it (PostgreSQL: the guard's
  /// FOR KEY SHARE lock does not hold plain UPDATEs off). Otherwise the watchdog leaves a guarded
  /// lease out of its batches until the guard ends.
  virtual bool renewals_pass_guards() const noexcept { return false; }

  /// Lease statements sent since construction, on both lanes (for benchmarks and tests).
  std::uint64_t statements() const noexcept { return statements_.load(std::memory_order_relaxed); }

 protected:
  void count_statement() noexcept { statements_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> statements_{0};
};

/// The schema version this library needs (migrations/<dialect>/0001_... up to this).
inline constexpr int required_schema_version = 4;

/// Longest wait for the answer to any lease statement (a hung server or a partition) when nothing
/// shorter applies.
inline constexpr std::chrono::milliseconds io_timeout{10000};

/// "sqlite", "postgresql" or "mysql".
std::string_view dialect_name(sqllock::dialect d) noexcept;

/// Send a message to the client's log callback, if any (never throws).
void log_message(const client_options& options, log_level level, std::string_view message) noexcept;

/// Substitute `{{locks}}`, `{{locks_schema}}`, `{{locks_semaphores}}` (and, for migrations, `{{locks_rebuild}}`,
/// `{{locks_bare}}`: the unqualified table name) in an embedded statement with the quoted
/// identifiers derived from the validated table name.
std::string render_sql(std::string_view sql_template, std::string_view table, sqllock::dialect d);

/// An embedded statement text: sql/<dialect>/<name>.sql. Throws std::logic_error if missing.
std::string_view embedded_sql(sqllock::dialect d, std::string_view name);
std::string_view embedded_sql(std::string_view dialect_name, std::string_view name);
/// The embedded migrations of a dialect, ordered by version: (version, file name, text).
struct embedded_migration {
  int version;
  std::string_view file;
  std::string_view text;
};
std::vector<embedded_migration> embedded_migrations(sqllock::dialect d);
std::vector<embedded_migration> embedded_migrations(std::string_view dialect_name);

/// A lane's lock, taken by `deadline`: a statement that could not even start in time throws
/// connection_lost (nothing was sent; the caller may say "not acquired" instead).
template <class Mutex>
std::unique_lock<Mutex> lock_lane(Mutex& m, steady::time_point deadline, std::string_view backend_name,
                                  std::string_view statement) {
  std::unique_lock<Mutex> lk(m, std::defer_lock);
  if (!lk.try_lock_until(deadline)) {
    throw connection_lost(std::string(backend_name) + " " + std::string(statement) +
                              ": the lease connection stayed busy until the statement's deadline",
                          std::string(backend_name), "", std::string(statement));
  }
  return lk;
}

/// How long a statement bounded by `deadline` outside the acquire itself (semaphore_permits, the
/// reader-writer looks) waits for this client's busy caller lane: the first half of the time to
/// its deadline, as an acquire does (its lane_deadline), so the statement keeps the other half.
inline steady::time_point caller_lane_until(steady::time_point deadline) {
  const auto now = steady::now();
  return deadline > now ? now + (deadline - now) / 2 : now;
}

/// Milliseconds from now until `deadline`, at least `floor` (for driver timeouts that need one).
std::chrono::milliseconds time_until(steady::time_point deadline,
                                     std::chrono::milliseconds floor = std::chrono::milliseconds(0));

// Factories, one per built backend (defined in src/<backend>/).
std::unique_ptr<backend> make_sqlite_backend(const backend_config& config);
std::unique_ptr<backend> make_postgresql_backend(const backend_config& config);
std::unique_ptr<backend> make_mysql_backend(const backend_config& config);

}  // namespace sqllock::detail
