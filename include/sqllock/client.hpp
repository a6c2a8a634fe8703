// The client users hold: lease locks with watchdog and waiting, transactions, administration.
#pragma once

#include "sqllock/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "sqllock/error.hpp"
#include "sqllock/events.hpp"
#include "sqllock/parse.hpp"
#include "sqllock/transaction.hpp"

namespace sqllock {

namespace detail {
class backend;
class lease_engine;
struct lease_state;
struct client_access;  // unit tests only: a client on a backend they built (src/core/client_access.hpp)
struct guard_access;   // the recipes: a release within a bound shared by several (src/core/guard_access.hpp)
}  // namespace detail

/// Severity of a message sent to client_options::log.
enum class log_level { debug, info, warning, error };

/// Receives everything the library has to say; the library never writes to stdout or stderr.
using log_callback = std::function<void(log_level, std::string_view message)>;

/// Whom a lease belongs to, for reentrancy.
enum class holder_scope {
  per_thread,  ///< holder id = client id + thread: threads sharing a client exclude each other
  per_client,  ///< holder id = client id exactly: every thread of the client re-enters
};

/// How a client connects and behaves. Every option of sqllock's own may also ride on the URL as a
/// query parameter prefixed `sqllock_` (`sqllock_table`, `sqllock_notifications=off`,
/// `sqllock_prepared_statements=off`, `sqllock_allow_unsafe_durability=on`; booleans take on/off,
/// true/false, 1/0, yes/no); the URL's value wins over the field's, and those parameters are
/// removed before the URL reaches the driver. An unknown `sqllock_` parameter or a bad value is an
/// invalid_argument naming it. SQLite URLs take them too: `sqlite:locks.db?sqllock_table=jobs`.
struct SQLLOCK_EXPORT client_options {
  /// A label for this client's leases, shown in `status` and `lock_info::holder`. Empty:
  /// "host:pid". It is not an identity: every acquisition also gets an owner id unique to it
  /// (`lease_guard::owner_id()`), so two clients or processes given the same label still exclude
  /// each other, and a lease is re-entered only through this client's own bookkeeping.
  std::string holder_id;
  holder_scope scope = holder_scope::per_thread;  ///< who re-enters a held lease (see holder_scope)
  /// Lock table name (validated identifier, optionally schema-qualified).
  std::string table = "sqllock_locks";
  /// Refuse to connect when the lock tables are missing or old (throws schema_missing), or newer
  /// than this library knows (schema_too_new). Off: no check at connect, no statement (migrate()
  /// still refuses a newer schema), and none later: the lease statements do not read the schema
  /// version (that takes a statement, a round trip, of its own, or a read of the version table
  /// inside the lease statements, paid by every call, not only the first), so such a client runs
  /// on a newer schema unwarned. Turn it off only to create the tables, and call
  /// migrate() before the first lease: it refuses a newer schema (schema_too_new).
  bool require_schema = true;
  /// Wake waiters through the database where it can (PostgreSQL LISTEN/NOTIFY, MySQL GET_LOCK,
  /// SQLite file locks). Off: polling with back-off only (e.g. PgBouncer in transaction mode).
  bool notifications = true;
  /// Use server-side prepared statements (PostgreSQL); off for PgBouncer in transaction mode.
  bool prepared_statements = true;
  /// Back-off between database polls of a waiting acquire, never past the holder's lease end.
  /// Where the database wakes waiters (notifications on and the watch accepted), polling is only
  /// the safety net and each wait is drawn uniformly from [poll_max/2, poll_max]; otherwise the
  /// n-th wait is drawn from [b/2, b] with b = min(poll_max, poll_min * 2^n).
  std::chrono::milliseconds poll_min{10};
  std::chrono::milliseconds poll_max{250};  ///< longest back-off between polls (see poll_min)
  /// Servers configured to flush commits lazily (MySQL/MariaDB `innodb_flush_log_at_trx_commit`
  /// other than 1) can lose an acknowledged acquisition in a crash and hand its fencing token out
  /// again; sqllock refuses to connect to them (database_error naming the setting) unless this
  /// is set. Where sqllock can make its own statements durable (PostgreSQL `synchronous_commit`,
  /// SQLite `synchronous`), it does so whatever this says.
  bool allow_unsafe_durability = false;
  /// Open the database for reading only (`status`, `inspect`, `list_locks`): acquiring, migrating
  /// and transactions throw invalid_argument. SQLite: a missing file is not created, and a read-only
  /// file or directory works.
  bool read_only = false;
  log_callback log;  ///< where the library's messages go (it never prints); unset: nowhere
  /// Lease events for metrics (acquired, renewed, at_risk, lost, released, statement_error); see
  /// event_callback for the thread it runs on and what it may do. Unset: no cost.
  event_callback on_event;
};

/// A lock as the database shows it.
struct SQLLOCK_EXPORT lock_info {
  std::string name;  ///< the lock's name
  std::string holder;  ///< the holder's label (client_options::holder_id)
  std::int64_t fencing_token = 0;  ///< the current acquisition's fencing token
  std::int64_t hold_count = 0;  ///< holds of the acquisition (this client's count when it holds it)
  std::chrono::milliseconds time_left{0};  ///< negative when expired
  std::string owner;                       ///< the acquisition's unique owner id
  /// When the current holder acquired it and when its lease ends, on the database's clock
  /// (SQLite: this machine's real-time clock); the epoch when unknown.
  std::chrono::system_clock::time_point acquired_at{};
  std::chrono::system_clock::time_point expires_at{};  ///< see acquired_at
};

/// What a lock-table row is. list_locks() reports rows by their row names: a plain lock's row is
/// named as the lock, while a reader-writer lease and a semaphore keep their rows under derived
/// names ("sqllock.rwlock.<bytes of L>.<L>.writer", ".reader.<client>.<scope>", ".fence";
/// "sqllock.semaphore.<bytes of S>.<S>.permit.<k>"; padded with '.' to 256 bytes) that no lock
/// name can be.
struct SQLLOCK_EXPORT row_name_info {
  /// The kinds of row.
  enum class kind {
    lock,      ///< a plain lock: `name` is the row name itself
    writer,    ///< the writer row of the reader-writer lease `name`
    reader,    ///< a reader row (one client's scope) of the reader-writer lease `name`
    rw_fence,  ///< the fencing counter of the reader-writer lease `name`: never held, no holder
    permit,    ///< permit `permit` of the semaphore `name`
  };
  kind what = kind::lock;  ///< which kind of row it is
  std::string name;  ///< the name the user gave: the lock, the reader-writer lease or the semaphore
  int permit = -1;   ///< kind::permit: the permit's slot (0-based); -1 otherwise
};

/// Decode a lock-table row name (lock_info::name as list_locks() gives it): the one parser of the
/// library's derived row names. Any other text, a lock name that merely looks alike included (a
/// derived name is 256 bytes or more, a lock name at most 255), is a plain lock.
SQLLOCK_EXPORT row_name_info decode_row_name(std::string_view row_name);

/// How a lease is held.
struct SQLLOCK_EXPORT lease_options {
  /// Lease duration; must be positive (at least 1 ms). The watchdog renews at about a third of it.
  std::chrono::milliseconds ttl{30000};
  /// Renew automatically while held (the watchdog). Off: the lease simply expires after ttl.
  bool auto_renew = true;
  /// Called once when the lease is found lost: from the client's deadline thread (at the local
  /// expiry estimate, whatever I/O is in flight), the watchdog, or renew(); after the lease's earlier
  /// notices (events.hpp: event_callback), so a blocking on_at_risk delays it. Must not block long.
  std::function<void(const std::string& name, std::int64_t fencing_token)> on_lost;
  /// Called once, before on_lost, when less than a third of the TTL is left by the local expiry
  /// estimate (renewals have failed or are late), so a holder can stop writing early. Never after
  /// on_lost: not called when the lease is lost before it could be.
  std::function<void(const std::string& name, std::int64_t fencing_token)> on_at_risk;
  /// Upper bound on holding (ShedLock's lockAtMostFor): the watchdog stops renewing this long after
  /// the acquisition, so a stuck holder cannot keep the lock forever. Zero: no bound. It bounds
  /// this hold: a re-entered (nested) hold past its max_hold is reported lost alone (its lost(),
  /// on_lost; usable() false) while the acquisition's other holds keep the lease, renewed as
  /// before; the lease itself stops being renewed, and is reported lost, once every hold of it
  /// is past its max_hold (a hold without one keeps it renewed until it is released). It counts
  /// from the start of the acquiring statement, like the TTL: an acquire answered at or after it
  /// would hand out a hold that is over already, so every acquire (try or waiting, lock, permit,
  /// read or write lock) throws lease_lost instead, frees the row, and is not tried again (its
  /// next statement would be as slow; a max_hold shorter than the database's answer time cannot
  /// be met).
  std::chrono::milliseconds max_hold{0};
  /// Lower bound on holding (ShedLock's lockAtLeastFor): a release earlier than acquisition +
  /// min_hold leaves the lease held until then (it is shortened to end there). Zero: none.
  std::chrono::milliseconds min_hold{0};
  /// Fair mode (ZooKeeper's sequential nodes; schema version 4): a waiting acquire takes a ticket
  /// in the name's queue (a row with an increasing sequence number) and the lock goes only to the
  /// lowest live ticket, so fair acquirers get it in the order they asked, across clients and
  /// processes. A fair holder's release hands the lock straight to the next ticket in the same
  /// statement (a new fencing token; the next holder learns it at its next poll, woken at once
  /// where the database wakes waiters). A single try (try_acquire) does not jump the queue either:
  /// it is refused while earlier tickets wait. Plain (unfair) acquires of the same name take no
  /// ticket and can take the lock only while it is free: never from a fair holder's release, but a
  /// stream of plain holders can keep fair waiters waiting; make every acquirer of a name fair.
  bool fair = false;
  /// Fair mode: how long a waiter's ticket lives without being renewed (at least 100 ms). The
  /// waiter renews it about four times per TTL while it waits, so a waiter that dies or stops
  /// holds the queue up for at most this long; a lease handed over to a waiter that died meanwhile
  /// also ends this long after the hand-over.
  std::chrono::milliseconds fair_ticket_ttl{2000};
};

/// A waiter in a fair queue (client::list_queue, `sqllock status`).
struct SQLLOCK_EXPORT queue_info {
  std::string name;    ///< the lock the waiter waits for
  std::string holder;  ///< the waiter's label (client_options::holder_id)
  std::int64_t seq = 0;  ///< its ticket's sequence number: the queue's order
  std::chrono::milliseconds waited{0};     ///< since it took its ticket (database clock)
  std::chrono::milliseconds time_left{0};  ///< until its ticket expires unless renewed
};

/// A held lease. Releases exactly once: explicitly, or in its destructor (which never throws and
/// reports a failed release to the client's log callback).
class SQLLOCK_EXPORT lease_guard {
 public:
  /// An empty guard (owns() is false).
  lease_guard() noexcept;
  /// Takes over the other guard's hold; that one becomes empty.
  lease_guard(lease_guard&&) noexcept;
  /// Releases this guard's hold (as its destructor does), then takes over the other's.
  lease_guard& operator=(lease_guard&&) noexcept;
  lease_guard(const lease_guard&) = delete;
  lease_guard& operator=(const lease_guard&) = delete;
  ~lease_guard();

  /// The lock's name; for a semaphore permit, the semaphore's name (see permit()); for a read or
  /// write lock of a reader-writer lease, the lease's name.
  const std::string& name() const;
  /// For a semaphore permit (client::acquire_permit), its slot: 0 to permits - 1; -1 for a lock.
  /// fencing_token() then grows strictly per (semaphore, slot): a resource that keeps the highest
  /// token seen per slot rejects a stale holder of that permit.
  int permit() const;
  /// The holder's label (client_options::holder_id), as `status` shows it.
  const std::string& holder_id() const;
  /// Strictly greater than every earlier acquisition's token of this name; kept when reentrant.
  std::int64_t fencing_token() const;
  /// The hold count right after this acquisition (1 for a first acquisition). Holds are counted by
  /// the client; the lock row knows only the acquisition.
  std::int64_t hold_count() const;
  /// True once the lease is lost: taken over or deleted (found by the watchdog or an operation), or
  /// not renewed in time by this process's monotonic clock (reported by the client's deadline
  /// thread at the local expiry estimate, whatever I/O is in flight); or once this hold is past its
  /// max_hold (its acquisition's other holds may keep the lease).
  bool lost() const noexcept;
  /// True while this guard owns a (possibly lost) acquisition that it has not released.
  bool owns() const noexcept;
  /// True while the lease may be relied on now: owned, not lost, and, by this process's monotonic
  /// clock, before the points where the client's deadline thread reports it lost: its loss point
  /// (valid_until() minus the loss margin, docs/internals.md "Clocks") and this hold's max_hold. The rule
  /// the client applies itself before it hands out any lease; unlike lost(), it does not wait for
  /// the deadline thread, which a loaded machine may run late. Check it before acting on a lease taken a while ago (acquire_all does, for the
  /// leases it took before waiting for the others). It does not consult the database: a lease
  /// taken over before its loss point (a force-release) is found by the watchdog or by
  /// transaction::require_lease.
  bool usable() const noexcept;
  /// The acquisition's unique owner id, as stored in the lock row (never shared by two clients).
  const std::string& owner_id() const;
  /// Until when, on this process's monotonic clock, the lease is known to be held: the start of
  /// its last successful acquire or renew plus its TTL. No other client can take it over before.
  /// Fair mode (lease_options::fair) with auto_renew: a lock handed over
  /// by its last holder is taken from the read that finds it, committing nothing, and until the
  /// watchdog's first renewal (due at a third of that, as for any lease) it lasts only what its
  /// hand-over gave it (the ticket's fair_ticket_ttl, less the time since); call renew() to have
  /// the full TTL ahead at once.
  std::chrono::steady_clock::time_point valid_until() const;
  /// The lock table the lease lives in (client_options::table of its client).
  const std::string& lock_table() const;
  /// owns().
  explicit operator bool() const noexcept { return owns(); }

  /// Renew now (the watchdog does this on its own). Throws lease_lost when the owner check fails,
  /// when the lease was already reported lost before the renewal's answer came, or when the
  /// database cannot be reached (after one retry on a fresh connection) and the lease has run out
  /// by the client's conservative clock; connection_lost while it may still be held.
  void renew();
  /// Release this hold now; the last hold of an acquisition frees the lock row (or, with min_hold,
  /// shortens it). Throws lease_lost if the owner check fails (the lease was taken over), and
  /// connection_lost when the answer was lost (the client sends it again in the background until
  /// the database answers or the lease has expired; so it does after a release the server rolled
  /// back, a deadlock victim or serialization failure, which is thrown as such). The guard is finished either way; calling
  /// release() on a finished or empty guard does nothing.
  void release();
  /// release(), waiting at most `bound` (at least 250 ms) for the database's answer: unanswered, it
  /// throws connection_lost and the client sends the release again in the background, as above.
  /// For a caller with a deadline of its own (acquire_all gives back with what is left of its
  /// timeout). A release is also never waited for past the lease's local expiry estimate.
  void release(std::chrono::milliseconds bound);

 private:
  friend class client;
  friend class transaction;
  friend struct detail::guard_access;
  SQLLOCK_NO_EXPORT explicit lease_guard(std::shared_ptr<detail::lease_state> s) noexcept;
  std::shared_ptr<detail::lease_state> state_;
};

/// A connection to one lock database. Move-only; uses a small, fixed number of connections: one for
/// the callers' lease statements (taken in FIFO order), one for the watchdog's renewals (so they
/// never wait behind callers), one more for notifications where the backend has them (PostgreSQL
/// LISTEN, MySQL GET_LOCK waits), plus one per open transaction (idle ones kept for reuse, at most 2).
class SQLLOCK_EXPORT client {
 public:
  /// Takes over the other client's connections; the moved-from client must not be used again.
  client(client&&) noexcept;
  /// Lets go of this client's connections (its guards stay valid and keep them while they live),
  /// then takes over the other's.
  client& operator=(client&&) noexcept;
  client(const client&) = delete;
  client& operator=(const client&) = delete;
  ~client();

  /// "sqlite", "postgresql" or "mysql".
  std::string_view backend_name() const noexcept;
  /// The SQL dialect of the lock database (for quoting identifiers in statements of your own).
  sqllock::dialect dialect() const;
  /// The label this client's leases carry (client_options::holder_id, or "host:pid:random").
  std::string holder_id() const;

  /// One attempt; std::nullopt when someone else holds a live lease. A lease this thread (or, with
  /// holder_scope::per_client, this client) already holds is re-entered without a statement.
  /// Like every acquire, throws lease_lost instead of returning a hold that is already over (an
  /// answer at or past options.max_hold, see lease_options::max_hold): nullopt would say someone
  /// else holds the name.
  std::optional<lease_guard> try_acquire(std::string_view name, const lease_options& options = {});
  /// Wait up to `timeout` (a timeout too large to represent waits without bound); std::nullopt when
  /// not acquired in time. Returns within `timeout` plus the last statement's answer (at most 250 ms).
  std::optional<lease_guard> try_acquire_for(std::string_view name, std::chrono::milliseconds timeout,
                                             const lease_options& options = {});
  /// Wait up to `timeout`; throws acquire_timeout (naming the holder) when not acquired in time,
  /// cancelled when `stop` is requested (an already stopped token acquires nothing).
  lease_guard acquire_for(std::string_view name, std::chrono::milliseconds timeout, const lease_options& options = {},
                          std::stop_token stop = {});
  /// Wait until acquired; throws cancelled when `stop` is requested.
  lease_guard acquire(std::string_view name, const lease_options& options = {}, std::stop_token stop = {});

  /// Counting semaphores (Curator InterProcessSemaphoreV2, Redisson RPermitExpirableSemaphore):
  /// at most `permits` holders of semaphore `name` at once. Each permit is a lease of its own, exactly
  /// like a lock's: expiry on the database clock, the watchdog, loss reporting (lost(), on_lost;
  /// on_lost receives the permit's lock-row name), release(), and its own fencing token, which
  /// strictly grows per permit slot (lease_guard::permit()), also across restarts. A permit of a
  /// holder that dies expires after its TTL and is free again. Permit k of `name` is stored as a
  /// lock row under a name longer than 255 bytes that no lock name can collide with.
  ///
  /// `permits` (1 to 10000) is stored with the name at its first use (schema version 3); asking
  /// with another number throws invalid_argument naming both numbers and changes nothing. Each call
  /// takes a new permit: a client never re-enters a permit it holds (hold_count() is always 1).
  /// Timeouts, stop tokens and results are as for try_acquire / try_acquire_for / acquire_for /
  /// acquire; a waiting acquire polls the permits with the client's back-off (poll_min..poll_max),
  /// and is woken at once when this client releases a permit of the name.
  std::optional<lease_guard> try_acquire_permit(std::string_view name, int permits, const lease_options& options = {});
  /// Wait up to `timeout` for a permit; std::nullopt when none was acquired in time.
  std::optional<lease_guard> try_acquire_permit_for(std::string_view name, int permits, std::chrono::milliseconds timeout,
                                                    const lease_options& options = {});
  /// Throws acquire_timeout (naming the semaphore and the holder of the permit that ends soonest).
  lease_guard acquire_permit_for(std::string_view name, int permits, std::chrono::milliseconds timeout,
                                 const lease_options& options = {}, std::stop_token stop = {});
  /// Wait until a permit is acquired; throws cancelled when `stop` is requested.
  lease_guard acquire_permit(std::string_view name, int permits, const lease_options& options = {},
                             std::stop_token stop = {});

  /// Reader-writer leases (Curator InterProcessReadWriteLock): many readers or one writer of `name`,
  /// with writer preference. Each read hold and each write hold is a lease of its own, exactly like a
  /// lock's (expiry on the database clock, the watchdog, lost(), on_lost, release()) with its own
  /// fencing token; on_lost receives the lock-row name. Readers and writers of `name` share one
  /// fencing sequence (a holder-less fence row that every acquisition advances): each acquisition,
  /// read or write, gets a token above every token `name` had before. The writer and the readers
  /// are lock rows under names longer than 255 bytes,
  /// so the read/write lock of `name` and the plain lock `name` are distinct (do not mix them on
  /// one resource; `sqllock run` refuses to).
  ///
  /// - Writer: first takes the writer row (this is also its intent: from then on new readers wait,
  ///   so a stream of readers cannot starve it), then waits until every reader that came before
  ///   has released (or its lease expired). Timing out or cancelled while they drain, it frees the
  ///   writer row: nothing stays held.
  /// - Reader: takes its own reader row, then checks the writer row; a live writer (not this
  ///   holder's own) makes it step aside and wait until the writer is gone.
  /// - Holders are scoped like locks (client_options::scope). A holder of the write lock re-enters
  ///   it (hold_count() grows), and may take the read lock (a downgrade: then release the write lock
  ///   and keep reading). A holder of the read lock re-enters it without waiting, even behind a
  ///   waiting writer (it would otherwise deadlock with it), and asking for the write lock throws
  ///   upgrade_refused at once, changing nothing. With holder_scope::per_client the client is one
  ///   holder: a read asked by one thread while another thread of it is still waiting for readers
  ///   to drain with its writer row stored is a downgrade too (granted at once; that writer does
  ///   not wait for it).
  /// Timeouts, stop tokens and results are as for try_acquire / try_acquire_for / acquire_for /
  /// acquire; a waiting writer polls the readers with the client's back-off (woken at once by this
  /// client's own releases), a waiting reader watches the writer row like a lock.
  std::optional<lease_guard> try_acquire_read(std::string_view name, const lease_options& options = {});
  /// Wait up to `timeout` for the read lock; std::nullopt when not acquired in time.
  std::optional<lease_guard> try_acquire_read_for(std::string_view name, std::chrono::milliseconds timeout,
                                                  const lease_options& options = {});
  /// Throws acquire_timeout (naming the writer's holder) when not acquired in time, cancelled when
  /// `stop` is requested.
  lease_guard acquire_read_for(std::string_view name, std::chrono::milliseconds timeout,
                               const lease_options& options = {}, std::stop_token stop = {});
  /// Wait until the read lock is acquired; throws cancelled when `stop` is requested.
  lease_guard acquire_read(std::string_view name, const lease_options& options = {}, std::stop_token stop = {});
  /// One attempt at the write lock: std::nullopt when a writer holds it or readers are inside (the
  /// writer row taken for the attempt is released again). Throws upgrade_refused while this holder
  /// has the read lock.
  std::optional<lease_guard> try_acquire_write(std::string_view name, const lease_options& options = {});
  /// Wait up to `timeout` for the write lock; std::nullopt when not acquired in time (nothing is
  /// left held).
  std::optional<lease_guard> try_acquire_write_for(std::string_view name, std::chrono::milliseconds timeout,
                                                   const lease_options& options = {});
  /// Throws acquire_timeout (naming another writer, or the reader whose lease ends last) when not
  /// acquired in time, cancelled when `stop` is requested; nothing is left held either way.
  lease_guard acquire_write_for(std::string_view name, std::chrono::milliseconds timeout,
                                const lease_options& options = {}, std::stop_token stop = {});
  /// Wait until the write lock is acquired; throws cancelled when `stop` is requested.
  lease_guard acquire_write(std::string_view name, const lease_options& options = {}, std::stop_token stop = {});
  /// A live holder of the reader-writer lease of `name` (its writer or a reader: the one whose lease
  /// ends last), with lock_info::name set to `name`; std::nullopt when nobody holds it.
  std::optional<lock_info> inspect_read_write(std::string_view name);
  /// A live holder of a permit of semaphore `name` (the one whose lease ends last), with
  /// lock_info::name set to `name`; std::nullopt when no permit is held.
  std::optional<lock_info> inspect_semaphore(std::string_view name);

  /// The lock row of `name` if it is held (live or expired-but-not-released). When this client holds
  /// it, hold_count is this client's count of holds.
  std::optional<lock_info> inspect(std::string_view name);
  /// Every lock with a live lease, by name.
  std::vector<lock_info> list_locks();
  /// The live fair-mode waiters of every name (not the holders), by name, then queue order.
  std::vector<queue_info> list_queue();
  /// Administrative release of a stuck lock, whoever holds it. Returns false if it was not held.
  /// The fencing sequence of the name is kept.
  bool force_release(std::string_view name);

  /// Begin a transaction on a connection of its own.
  transaction begin(const transaction_options& options = {});

  /// Create or upgrade the lock tables (idempotent, safe from many processes at once).
  /// Returns the schema version now present. Throws schema_too_new, having changed nothing, when
  /// the tables are newer than this library knows (required_schema_version()).
  int migrate();
  /// The schema version present (0 = no lock tables).
  int schema_version();
  /// The schema version this library needs, and the newest it knows.
  static int required_schema_version() noexcept;

  /// Statements sent to the database on the lease connection since connect (for benchmarks).
  std::uint64_t statement_count() const noexcept;

 private:
  friend client connect(std::string_view, const client_options&);
  friend struct detail::client_access;
  SQLLOCK_NO_EXPORT client(std::unique_ptr<detail::backend> b, const client_options& options);
  std::shared_ptr<detail::lease_engine> engine_;
};

/// Connect to the lock database named by `url`:
///   `postgresql://user:pass@host:port/db?...` (or `postgres://`), `mysql://user:pass@host:port/db`
///   (or mariadb://; TLS: ?ssl-mode=...&ssl-ca=...&ssl-cert=...&ssl-key=...),
///   sqlite:PATH, sqlite:///abs/path.db, sqlite::memory: (sqlite:PATH?mode=ro: read_only)
/// Throws invalid_argument (bad URL or unknown scheme, or a backend not built in), connection_lost
/// (unreachable), schema_missing (when options.require_schema and the tables are missing or old;
/// schema_too_new when they are newer than this library knows).
SQLLOCK_EXPORT client connect(std::string_view url, const client_options& options = {});

}  // namespace sqllock
