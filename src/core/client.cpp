// sqllock::client and sqllock::lease_guard: the public face of the lease engine.
#include "sqllock/client.hpp"

#include "core/backend.hpp"
#include "core/lease_engine.hpp"

namespace sqllock {

using detail::steady;
using std::chrono::milliseconds;

// ---- lease_guard ----

lease_guard::lease_guard() noexcept = default;
lease_guard::lease_guard(std::shared_ptr<detail::lease_state> s) noexcept : state_(std::move(s)) {}
lease_guard::lease_guard(lease_guard&&) noexcept = default;

lease_guard& lease_guard::operator=(lease_guard&& other) noexcept {
  if (this != &other) {
    lease_guard old(std::move(*this));
    state_ = std::move(other.state_);
  }
  return *this;
}

lease_guard::~lease_guard() {
  if (!state_ || state_->finished.load()) return;
  auto& engine = *state_->engine;
  try {
    engine.release(*state_);
  } catch (const std::exception& e) {
    detail::log_message(engine.options(), log_level::error,
                        std::string("release in guard destructor failed: ") + e.what());
  } catch (...) {
    detail::log_message(engine.options(), log_level::error,
                        "release in guard destructor failed with an unknown exception");
  }
}

namespace {
const detail::lease_state& checked(const std::shared_ptr<detail::lease_state>& s) {
  if (!s) throw invalid_argument("empty lease_guard");
  return *s;
}
}  // namespace

const std::string& lease_guard::name() const {
  const auto& s = checked(state_);
  if (s.permit >= 0) return s.semaphore;
  return s.rw_side != 0 ? s.rw_name : s.acq->ref.name;
}
int lease_guard::permit() const { return checked(state_).permit; }
const std::string& lease_guard::holder_id() const { return checked(state_).acq->holder; }
std::int64_t lease_guard::fencing_token() const { return checked(state_).acq->ref.token; }
std::int64_t lease_guard::hold_count() const { return checked(state_).hold_count; }
bool lease_guard::lost() const noexcept { return state_ && (state_->lost.load() || state_->acq->lost.load()); }
bool lease_guard::owns() const noexcept { return state_ && !state_->finished.load(); }
bool lease_guard::usable() const noexcept { return state_ && state_->engine->usable(*state_); }
const std::string& lease_guard::owner_id() const { return checked(state_).acq->ref.owner; }
steady::time_point lease_guard::valid_until() const { return checked(state_).acq->valid_until_time(); }
const std::string& lease_guard::lock_table() const { return checked(state_).engine->options().table; }

void lease_guard::renew() {
  checked(state_);
  state_->engine->renew(*state_);
}

void lease_guard::release() {
  if (!state_ || state_->finished.load()) return;
  state_->engine->release(*state_);
}

void lease_guard::release(std::chrono::milliseconds bound) {
  if (bound.count() < 0) throw invalid_argument("lease_guard::release: negative bound");
  if (!state_ || state_->finished.load()) return;
  const auto now = std::chrono::steady_clock::now();
  const auto representable = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::time_point::max() - now);
  state_->engine->release(*state_, bound < representable ? now + bound : std::chrono::steady_clock::time_point::max());
}

// ---- client ----

namespace {
// A schema migrated by a newer sqllock: its statements may have changed meaning, so refuse it.
void refuse_newer_schema(int v, std::string_view backend) {
  if (v <= detail::required_schema_version) return;
  throw schema_too_new("the lock tables are at schema version " + std::to_string(v) + ", newer than version " +
                           std::to_string(detail::required_schema_version) +
                           " that this sqllock knows (a newer sqllock upgraded them): upgrade sqllock; this one "
                           "refuses to use them, since its statements may no longer mean what they did there",
                       std::string(backend), v, detail::required_schema_version);
}
}  // namespace

client::client(std::unique_ptr<detail::backend> b, const client_options& options)
    : engine_(std::make_shared<detail::lease_engine>(std::move(b), options)) {
  if (options.require_schema) {
    const int v = engine_->db().schema_version();
    refuse_newer_schema(v, engine_->db().kind());
    if (v < required_schema_version()) {
      throw schema_missing(v == 0 ? "the lock tables are missing: run `sqllock migrate` first"
                                  : "the lock tables are at schema version " + std::to_string(v) + ", need " +
                                        std::to_string(required_schema_version()) + ": run `sqllock migrate`",
                           std::string(engine_->db().kind()), "", "schema_version");
    }
  }
}

client::client(client&&) noexcept = default;
client& client::operator=(client&&) noexcept = default;
client::~client() = default;

int client::required_schema_version() noexcept { return detail::required_schema_version; }

namespace {
detail::lease_engine& live(const std::shared_ptr<detail::lease_engine>& e) {
  if (!e) throw invalid_argument("use of a moved-from sqllock::client");
  return *e;
}
}  // namespace

std::string_view client::backend_name() const noexcept { return engine_ ? engine_->db().kind() : ""; }
sqllock::dialect client::dialect() const { return live(engine_).db().dialect(); }
std::string client::holder_id() const { return live(engine_).label(); }
std::uint64_t client::statement_count() const noexcept { return engine_ ? engine_->db().statements() : 0; }

std::optional<lease_guard> client::try_acquire(std::string_view name, const lease_options& options) {
  auto s = live(engine_).acquire(name, options, milliseconds(0), {}, false);
  if (!s) return std::nullopt;
  return lease_guard(std::move(s));
}

std::optional<lease_guard> client::try_acquire_for(std::string_view name, milliseconds timeout,
                                                   const lease_options& options) {
  if (timeout.count() < 0) throw invalid_argument("try_acquire_for: negative timeout");
  auto s = live(engine_).acquire(name, options, timeout, {}, false);
  if (!s) return std::nullopt;
  return lease_guard(std::move(s));
}

lease_guard client::acquire_for(std::string_view name, milliseconds timeout, const lease_options& options,
                                std::stop_token stop) {
  if (timeout.count() < 0) throw invalid_argument("acquire_for: negative timeout");
  return lease_guard(live(engine_).acquire(name, options, timeout, std::move(stop), true));
}

lease_guard client::acquire(std::string_view name, const lease_options& options, std::stop_token stop) {
  return lease_guard(live(engine_).acquire(name, options, std::nullopt, std::move(stop), true));
}

std::optional<lease_guard> client::try_acquire_permit(std::string_view name, int permits, const lease_options& options) {
  auto s = live(engine_).acquire_permit(name, permits, options, milliseconds(0), {}, false);
  if (!s) return std::nullopt;
  return lease_guard(std::move(s));
}

std::optional<lease_guard> client::try_acquire_permit_for(std::string_view name, int permits, milliseconds timeout,
                                                          const lease_options& options) {
  if (timeout.count() < 0) throw invalid_argument("try_acquire_permit_for: negative timeout");
  auto s = live(engine_).acquire_permit(name, permits, options, timeout, {}, false);
  if (!s) return std::nullopt;
  return lease_guard(std::move(s));
}

lease_guard client::acquire_permit_for(std::string_view name, int permits, milliseconds timeout,
                                       const lease_options& options, std::stop_token stop) {
  if (timeout.count() < 0) throw invalid_argument("acquire_permit_for: negative timeout");
  return lease_guard(live(engine_).acquire_permit(name, permits, options, timeout, std::move(stop), true));
}

lease_guard client::acquire_permit(std::string_view name, int permits, const lease_options& options,
                                   std::stop_token stop) {
  return lease_guard(live(engine_).acquire_permit(name, permits, options, std::nullopt, std::move(stop), true));
}

std::optional<lease_guard> client::try_acquire_read(std::string_view name, const lease_options& options) {
  auto s = live(engine_).acquire_read(name, options, milliseconds(0), {}, false);
  if (!s) return std::nullopt;
  return lease_guard(std::move(s));
}

std::optional<lease_guard> client::try_acquire_read_for(std::string_view name, milliseconds timeout,
                                                  const lease_options& options) {
  if (timeout.count() < 0) throw invalid_argument("try_acquire_read_for: negative timeout");
  auto s = live(engine_).acquire_read(name, options, timeout, {}, false);
  if (!s) return std::nullopt;
  return lease_guard(std::move(s));
}

lease_guard client::acquire_read_for(std::string_view name, milliseconds timeout, const lease_options& options,
                               std::stop_token stop) {
  if (timeout.count() < 0) throw invalid_argument("acquire_read_for: negative timeout");
  return lease_guard(live(engine_).acquire_read(name, options, timeout, std::move(stop), true));
}

lease_guard client::acquire_read(std::string_view name, const lease_options& options, std::stop_token stop) {
  return lease_guard(live(engine_).acquire_read(name, options, std::nullopt, std::move(stop), true));
}

std::optional<lease_guard> client::try_acquire_write(std::string_view name, const lease_options& options) {
  auto s = live(engine_).acquire_write(name, options, milliseconds(0), {}, false);
  if (!s) return std::nullopt;
  return lease_guard(std::move(s));
}

std::optional<lease_guard> client::try_acquire_write_for(std::string_view name, milliseconds timeout,
                                                  const lease_options& options) {
  if (timeout.count() < 0) throw invalid_argument("try_acquire_write_for: negative timeout");
  auto s = live(engine_).acquire_write(name, options, timeout, {}, false);
  if (!s) return std::nullopt;
  return lease_guard(std::move(s));
}

lease_guard client::acquire_write_for(std::string_view name, milliseconds timeout, const lease_options& options,
                               std::stop_token stop) {
  if (timeout.count() < 0) throw invalid_argument("acquire_write_for: negative timeout");
  return lease_guard(live(engine_).acquire_write(name, options, timeout, std::move(stop), true));
}

lease_guard client::acquire_write(std::string_view name, const lease_options& options, std::stop_token stop) {
  return lease_guard(live(engine_).acquire_write(name, options, std::nullopt, std::move(stop), true));
}

std::optional<lock_info> client::inspect_read_write(std::string_view name) {
  return live(engine_).inspect_read_write(name);
}

std::optional<lock_info> client::inspect_semaphore(std::string_view name) {
  return live(engine_).inspect_semaphore(name);
}

std::optional<lock_info> client::inspect(std::string_view name) { return live(engine_).inspect(std::string(name)); }
std::vector<lock_info> client::list_locks() { return live(engine_).list_locks(); }
std::vector<queue_info> client::list_queue() {
  std::vector<queue_info> out;
  for (auto& w : live(engine_).db().list_queue()) out.push_back({w.name, w.holder, w.seq, w.waited, w.time_left});
  return out;
}
bool client::force_release(std::string_view name) { return live(engine_).force_release(std::string(name)); }

transaction client::begin(const transaction_options& options) {
  if (options.lock_timeout && options.lock_timeout->count() < 0) {
    throw invalid_argument("transaction_options: negative lock_timeout");
  }
  return transaction(live(engine_).db().begin(options));
}

int client::migrate() {
  auto& db = live(engine_).db();
  // The backend applies no step above the version it finds, so a newer schema is left as it was.
  const int v = db.migrate();
  refuse_newer_schema(v, db.kind());
  return v;
}
int client::schema_version() { return live(engine_).db().schema_version(); }

}  // namespace sqllock
