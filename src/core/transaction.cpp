// The transaction RAII wrapper, CAS result access and the retry helper's back-off.
#include "sqllock/transaction.hpp"

#include <random>
#include <thread>

#include "core/backend.hpp"
#include "core/lease_engine.hpp"
#include "sqllock/client.hpp"

namespace sqllock {

std::int64_t cas_result::value() const {
  switch (outcome) {
    case status::applied:
      return version;
    case status::conflict:
      throw version_conflict("optimistic update conflict: the row is at version " + std::to_string(version));
    case status::missing:
      break;
  }
  throw database_error("optimistic update: the row does not exist");
}

void fenced_update_result::value() const {
  switch (outcome) {
    case status::applied:
      return;
    case status::rejected:
      throw fence_rejected(
          "fenced update refused: a writer with token " + std::to_string(fence) + " has written the row", fence);
    case status::missing:
      break;
  }
  throw database_error("fenced update: the row does not exist");
}

transaction::transaction(std::unique_ptr<detail::session> s) : session_(std::move(s)) {}
transaction::transaction(transaction&&) noexcept = default;

transaction& transaction::operator=(transaction&& other) noexcept {
  if (this != &other) {
    if (session_) session_->rollback();
    session_ = std::move(other.session_);
    guard_failed_ = other.guard_failed_;
    guard_ = std::move(other.guard_);
  }
  return *this;
}

transaction::~transaction() {
  if (session_) session_->rollback();
  guard_.reset();
}

namespace {
detail::session& live(const std::unique_ptr<detail::session>& s) {
  if (!s) throw invalid_argument("transaction already committed or rolled back");
  return *s;
}
}  // namespace

void transaction::commit() {
  auto s = std::move(session_);
  struct unguard {
    std::shared_ptr<void>& g;
    ~unguard() { g.reset(); }
  } end_guard{guard_};
  if (guard_failed_ && s) {
    s->rollback();
    throw lease_lost("commit refused: the lease guarding this transaction was lost; nothing was committed");
  }
  live(s).commit();
}

void transaction::rollback() {
  if (auto s = std::move(session_)) s->rollback();
  guard_.reset();
}

bool transaction::active() const noexcept { return session_ != nullptr; }

std::int64_t transaction::execute(std::string_view sql, const std::vector<value>& params) {
  return live(session_).execute(sql, params);
}

result_rows transaction::query(std::string_view sql, const std::vector<value>& params) {
  return live(session_).query(sql, params);
}

cas_result transaction::cas(const cas_request& request) {
  validate_identifier(request.table);
  validate_identifier(request.version_column);
  if (request.key.empty()) throw invalid_argument("cas: at least one key column is needed");
  for (const auto& [col, v] : request.key) validate_identifier(col);
  for (const auto& [col, v] : request.set) {
    validate_identifier(col);
    if (col == request.version_column) throw invalid_argument("cas: the version column is set by sqllock itself");
  }
  return live(session_).cas(request);
}

row_lock_result transaction::lock_rows(const row_lock_request& request) {
  validate_identifier(request.table);
  validate_identifier(request.key_column);
  for (const auto& c : request.columns) validate_identifier(c);
  if (request.keys.empty()) throw invalid_argument("lock_rows: no keys given");
  if (request.timeout && request.timeout->count() < 0) throw invalid_argument("lock_rows: negative timeout");
  return live(session_).lock_rows(request);
}

void transaction::require_lease(const lease_guard& lease) {
  auto& s = live(session_);
  if (!lease.owns()) {
    // name() of an empty guard throws invalid_argument; a released one is not held any more.
    throw not_holder("require_lease: lease '" + lease.name() + "' was already released by this guard");
  }
  // The lock row the lease holds: for a semaphore permit, the permit's own row (name() is the
  // semaphore's name, which names no row).
  const detail::lease_ref ref{lease.state_->acq->ref.name, lease.owner_id(), lease.fencing_token()};
  const std::string shown = lease.permit() >= 0 ? lease.name() + "' permit " + std::to_string(lease.permit())
                                                 : lease.name() + "'";
  const std::string& table = lease.lock_table();
  // The lease counts as guarded from before the statement, not after it: a release on another
  // thread while the guard is in flight is then held back too (lease_engine::release). A failed
  // guard stays counted until the transaction ends too (its statement may have locked the row, and
  // the caller must roll back). Until this transaction ends, the lease is guarded
  // (the watchdog may leave it out of batches). An earlier guard of this transaction (another
  // lease, or this one) stays counted: the new mark holds the previous one.
  auto state = lease.state_;
  ++state->acq->guards;
  std::shared_ptr<void> mark(nullptr, [state, previous = std::move(guard_)](void*) mutable {
    --state->acq->guards;
    state->engine->guard_ended();
    previous.reset();
  });
  bool held = false;
  try {
    // usable() after the statement: the guard's row lock must be taken before the lease's loss
    // point. A guard that waited for another statement's row lock (a reader-writer check, which
    // locks the row without changing it) may have tested the row's expiry before that wait, and
    // PostgreSQL does not test an unchanged row again (MariaDB's UTC_TIMESTAMP is the statement's
    // start): such a guard can come back past the expiry, when the other side has already found
    // the lease expired and gone in.
    held = !lease.lost() && s.require_lease(table, ref) && lease.usable();
  } catch (...) {
    guard_failed_ = true;
    guard_ = std::move(mark);  // keeps the earlier guards; this one's count goes with the transaction
    throw;
  }
  guard_ = std::move(mark);
  if (!held) {
    guard_failed_ = true;
    throw lease_lost("lease '" + shown + " (token " + std::to_string(ref.token) +
                     ") is no longer held: this transaction must not write");
  }
}

fenced_update_result transaction::fenced_update(const fenced_update_request& request) {
  validate_identifier(request.table);
  validate_identifier(request.fence_column);
  if (request.key.empty()) throw invalid_argument("fenced_update: at least one key column is needed");
  if (request.token <= 0) throw invalid_argument("fenced_update: a fencing token is positive");
  for (const auto& [col, v] : request.key) validate_identifier(col);
  for (const auto& [col, v] : request.set) {
    validate_identifier(col);
    if (col == request.fence_column) throw invalid_argument("fenced_update: the fence column is set by sqllock itself");
  }
  return live(session_).fenced_update(request);
}

void retry_backoff_sleep(const retry_policy& policy, int attempt) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  auto base = policy.backoff_min.count() << std::min(attempt - 1, 20);
  base = std::min<std::int64_t>(base, policy.backoff_max.count());
  if (base <= 0) return;
  std::uniform_int_distribution<std::int64_t> dist(base / 2, base);
  std::this_thread::sleep_for(std::chrono::milliseconds(dist(rng)));
}

void throw_retries_exhausted(const char* what, int attempts) {
  throw retries_exhausted("gave up after " + std::to_string(attempts) + " attempts; last error: " + what, attempts);
}

}  // namespace sqllock
