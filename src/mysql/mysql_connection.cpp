// MySQL connections: connecting from the URL, prepared statements with bound values, the idle pool.
#include <cppconn/connection.h>
#include <cppconn/datatype.h>
#include <cppconn/driver.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/resultset_metadata.h>
#include <cppconn/statement.h>

#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <condition_variable>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>

#include "core/url.hpp"
#include "mysql/mysql_connection.hpp"
#include "sqllock/error.hpp"

namespace sqllock::detail::mysql {
namespace {

constexpr std::size_t max_cached_statements = 48;

sql::Driver& driver() {
  // get_driver_instance() is not safe to race on first use; a function-local static is.
  static sql::Driver* const d = get_driver_instance();
  return *d;
}

int parse_int_param(const std::string& key, const std::string& text, int lo, int hi) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || v < lo || v > hi) {
    throw invalid_argument("mysql URL parameter " + key + " must be a whole number from " + std::to_string(lo) +
                           " to " + std::to_string(hi));
  }
  return static_cast<int>(v);
}

/// Whether the connection runs over TLS (its session's Ssl_cipher is set).
bool tls_in_use(sql::Connection& c) {
  std::unique_ptr<sql::Statement> s(c.createStatement());
  std::unique_ptr<sql::ResultSet> r(s->executeQuery(statement_text("session_tls", "sqllock_locks")));
  return r->next() && !std::string(r->getString(2)).empty();
}

}  // namespace

connect_params make_connect_params(const database_url& url) {
  using tls = connect_params::tls;
  connect_params p;
  p.url = url;
  bool mode_given = false;
  for (const auto& [key, val] : url.params) {
    if (key == "connect_timeout") {
      p.connect_timeout_s = parse_int_param(key, val, 1, 3600);
    } else if (key == "socket") {
      if (val.empty()) throw invalid_argument("mysql URL parameter socket must name a path");
    } else if (key == "ssl-mode") {
      std::string mode;
      for (char c : val) mode += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      static const std::pair<const char*, tls> modes[] = {{"disabled", tls::disabled},
                                                          {"preferred", tls::preferred},
                                                          {"required", tls::required},
                                                          {"verify_ca", tls::verify_ca},
                                                          {"verify_identity", tls::verify_identity}};
      const auto* found = std::find_if(std::begin(modes), std::end(modes), [&](const auto& m) { return mode == m.first; });
      if (found == std::end(modes)) {
        std::string shown;
        for (char c : val.substr(0, 32)) shown += c >= 0x20 && c < 0x7f ? c : '?';
        throw invalid_argument("mysql URL parameter ssl-mode: unknown value '" + shown +
                               "' (known: disabled, preferred, required, verify_ca, verify_identity)");
      }
      p.ssl_mode = found->second;
      mode_given = true;
    } else if (key == "ssl-ca" || key == "ssl-capath" || key == "ssl-cert" || key == "ssl-key" ||
               key == "ssl-cipher") {
      if (val.empty()) throw invalid_argument("mysql URL parameter " + key + " must not be empty");
      (key == "ssl-ca"       ? p.ssl_ca
       : key == "ssl-capath" ? p.ssl_capath
       : key == "ssl-cert"   ? p.ssl_cert
       : key == "ssl-key"    ? p.ssl_key
                             : p.ssl_cipher) = val;
    } else {
      throw invalid_argument("unknown mysql URL parameter '" + key +
                             "' (known: connect_timeout, socket, ssl-mode, ssl-ca, ssl-capath, ssl-cert, ssl-key, "
                             "ssl-cipher)");
    }
  }
  if (p.ssl_cert.empty() != p.ssl_key.empty()) {
    throw invalid_argument(std::string("mysql URL parameter ") + (p.ssl_cert.empty() ? "ssl-key" : "ssl-cert") +
                           " needs " + (p.ssl_cert.empty() ? "ssl-cert" : "ssl-key") +
                           " too (the client certificate and its key)");
  }
  const bool any_file = !p.ssl_ca.empty() || !p.ssl_capath.empty() || !p.ssl_cert.empty() || !p.ssl_cipher.empty();
  if (mode_given && p.ssl_mode == tls::disabled && any_file) {
    throw invalid_argument("mysql URL: ssl-mode=disabled contradicts ssl-ca, ssl-capath, ssl-cert, ssl-key or ssl-cipher");
  }
  if ((p.ssl_mode == tls::verify_ca || p.ssl_mode == tls::verify_identity) && p.ssl_ca.empty() && p.ssl_capath.empty()) {
    throw invalid_argument(std::string("mysql URL: ssl-mode=") +
                           (p.ssl_mode == tls::verify_ca ? "verify_ca" : "verify_identity") +
                           " needs ssl-ca (or ssl-capath): the certificate authority to verify the server with");
  }
  return p;
}

namespace {

/// The connected sockets of this process: fd -> (inode, peer port; 0 for a unix socket).
struct socket_info {
  ino_t inode;
  int peer_port;
};
std::map<int, socket_info> connected_sockets() {
  std::map<int, socket_info> out;
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return out;
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd == own) continue;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
    int port = 0;
    if (peer.ss_family == AF_INET) port = ntohs(reinterpret_cast<sockaddr_in*>(&peer)->sin_port);
    if (peer.ss_family == AF_INET6) port = ntohs(reinterpret_cast<sockaddr_in6*>(&peer)->sin6_port);
    out[fd] = {st.st_ino, port};
  }
  ::closedir(dir);
  return out;
}

/// Serializes sqllock's own connects, so that the socket a connect opened can be told apart. A
/// flag under a mutex and a condition variable rather than std::timed_mutex: a connect waits for
/// it no longer than its own deadline, and ThreadSanitizer does not see timed_mutex's timed lock
/// (pthread_mutex_clocklock), so it reported each unlock as one of an unlocked mutex.
class connect_slot {
 public:
  /// Takes the slot, waiting until `deadline` at most; false: not free by then.
  bool take(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lk(m_);
    if (!cv_.wait_until(lk, deadline, [this] { return !busy_; })) return false;
    busy_ = true;
    return true;
  }
  void give_back() {
    {
      std::lock_guard lk(m_);
      busy_ = false;
    }
    cv_.notify_one();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool busy_ = false;
};

connect_slot& the_connect_slot() {
  static connect_slot s;
  return s;
}

}  // namespace

std::unique_ptr<sql::Connection> open_connection(const connect_params& params, bool found_rows, int read_timeout_s,
                                                 int* socket_fd, int connect_timeout_s,
                                                 std::chrono::steady_clock::time_point until) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::seconds(connect_timeout_s > 0 ? connect_timeout_s : params.connect_timeout_s);
  if (until != std::chrono::steady_clock::time_point{}) deadline = std::min(deadline, until);
  const database_url& url = params.url;
  const int server_port = url.port > 0 ? url.port : 3306;
  sql::ConnectOptionsMap props;
  props["hostName"] = sql::SQLString(url.host.empty() ? std::string("localhost") : url.host);
  props["port"] = url.port > 0 ? url.port : 3306;
  props["userName"] = sql::SQLString(url.user);
  props["password"] = sql::SQLString(url.password);
  if (!url.database.empty()) props["schema"] = sql::SQLString(url.database);
  if (auto it = url.params.find("socket"); it != url.params.end()) {
    props["socket"] = sql::SQLString(it->second);
  }
  props["OPT_CONNECT_TIMEOUT"] =
      connect_timeout_s > 0 ? std::min(connect_timeout_s, params.connect_timeout_s) : params.connect_timeout_s;
  if (read_timeout_s > 0) {
    props["OPT_READ_TIMEOUT"] = read_timeout_s;
    props["OPT_WRITE_TIMEOUT"] = read_timeout_s;
  }
  props["OPT_RECONNECT"] = false;
  props["CLIENT_FOUND_ROWS"] = found_rows;
  props["OPT_CHARSET_NAME"] = sql::SQLString("utf8mb4");
  // TLS (Connector/C++ 1.1 connection properties). Values are file paths, handed to the driver as
  // they are. OPT_SSL_MODE is honoured by a connector built on libmysqlclient; one built on
  // MariaDB's libmariadb (Debian's) ignores it: there sslEnforce (MYSQL_OPT_SSL_ENFORCE) makes the
  // client start TLS, and sslVerify (MYSQL_OPT_SSL_VERIFY_SERVER_CERT: the certificate against the
  // CA and the host name; there both verify modes check the host name) makes it refuse a server
  // without TLS. libmariadb falls back to plain text under sslEnforce alone, so every mode from
  // `required` on is also checked after the connect (tls_in_use below).
  using tls = connect_params::tls;
  const auto path_prop = [&props](const char* name, const std::string& v) {
    if (!v.empty()) props[name] = sql::SQLString(v);
  };
  path_prop("sslCA", params.ssl_ca);
  path_prop("sslCAPath", params.ssl_capath);
  path_prop("sslCert", params.ssl_cert);
  path_prop("sslKey", params.ssl_key);
  path_prop("sslCipher", params.ssl_cipher);
  switch (params.ssl_mode) {
    case tls::disabled:
      props["OPT_SSL_MODE"] = static_cast<int>(sql::SSL_MODE_DISABLED);
      break;
    case tls::preferred:
      break;  // the driver's default
    case tls::required:
      props["OPT_SSL_MODE"] = static_cast<int>(sql::SSL_MODE_REQUIRED);
      props["sslEnforce"] = true;
      break;
    case tls::verify_ca:
      props["OPT_SSL_MODE"] = static_cast<int>(sql::SSL_MODE_VERIFY_CA);
      props["sslEnforce"] = true;
      props["sslVerify"] = true;
      break;
    case tls::verify_identity:
      props["OPT_SSL_MODE"] = static_cast<int>(sql::SSL_MODE_VERIFY_IDENTITY);
      props["sslEnforce"] = true;
      props["sslVerify"] = true;
      break;
  }
  try {
    std::unique_ptr<sql::Connection> c;
    bool tls_ok = true;  // checked inside the connect's deadline
    const auto check_tls = [&] {
      if (c && params.ssl_mode >= tls::required) tls_ok = tls_in_use(*c);
    };
    if (socket_fd) {
      *socket_fd = -1;
      // Waited for no longer than this connect's own deadline: another lane's connect into a
      // partition must not hold this one (a release bounded by its caller's deadline) for its own.
      if (!the_connect_slot().take(deadline)) {
        throw connection_lost("mysql: cannot connect to " + url.redacted() +
                                  ": no answer in time (another connect of this process was still waiting)",
                              std::string(backend_name), "", "connect");
      }
      struct slot_back {
        ~slot_back() { the_connect_slot().give_back(); }
      } slot_taken;
      const auto before = connected_sockets();
      // The handshake after the TCP connect is bounded by the read timeout only (whole seconds, and
      // the socket is not known yet): at the deadline, shut down whatever socket this connect
      // opened, so a partition cannot hold it for longer.
      std::mutex done_mutex;
      std::condition_variable done_cv;
      bool done = false;
      std::thread guard([&] {
        std::unique_lock dl(done_mutex);
        if (done_cv.wait_until(dl, deadline, [&] { return done; })) return;
        for (const auto& [fd, info] : connected_sockets()) {
          auto it = before.find(fd);
          const bool fresh = it == before.end() || it->second.inode != info.inode;
          if (fresh && (info.peer_port == 0 || info.peer_port == server_port)) ::shutdown(fd, SHUT_RDWR);
        }
      });
      struct finish {
        std::mutex& m;
        std::condition_variable& cv;
        bool& done;
        std::thread& t;
        ~finish() {
          {
            std::lock_guard dl(m);
            done = true;
          }
          cv.notify_all();
          t.join();
        }
      } finished{done_mutex, done_cv, done, guard};
      c.reset(driver().connect(props));
      check_tls();
      std::vector<int> fresh;
      for (const auto& [fd, info] : connected_sockets()) {
        auto it = before.find(fd);
        if ((it == before.end() || it->second.inode != info.inode) &&
            (info.peer_port == 0 || info.peer_port == server_port))
          fresh.push_back(fd);
      }
      // Exactly one new socket connected to the server's port: ours. Another thread of the
      // application connecting to the same server at the same instant makes it ambiguous; then
      // statements are bounded by the read timeout only.
      if (fresh.size() == 1) *socket_fd = fresh.front();
    } else {
      c.reset(driver().connect(props));
      check_tls();
    }
    if (!c)
      throw connection_lost("mysql: cannot connect to " + url.redacted(), std::string(backend_name), "", "connect");
    if (!tls_ok) {
      throw connection_lost("mysql: cannot connect to " + url.redacted() +
                                ": the URL requires TLS (ssl-mode) but the server did not use TLS/SSL for this "
                                "connection (does it have TLS configured: have_ssl?)",
                            std::string(backend_name), "", "connect");
    }
    return c;
  } catch (const sql::SQLException& e) {
    // A connect error carries no bound values, only names (database, user, host): keep them all
    // and remove the secrets, should the driver ever repeat one.
    std::string reason = e.what();
    scrub_secrets(reason, url);
    throw connection_lost("mysql: cannot connect to " + url.redacted() + ": " + reason + " (error " +
                              std::to_string(e.getErrorCode()) + ")",
                          std::string(backend_name), std::to_string(e.getErrorCode()), "connect");
  }
}

deadline_timer::~deadline_timer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

deadline_timer::armed deadline_timer::arm(int fd, std::chrono::steady_clock::time_point deadline) {
  std::lock_guard lock(mutex_);
  const auto id = next_id_++;
  if (fd >= 0) {
    entries_[id] = {fd, deadline, false};
    if (!thread_.joinable()) {
      thread_ = std::thread([this] { loop(); });
    } else if (deadline < sleeping_until_) {
      // Wake the thread only when it sleeps past this deadline. Deadlines mostly grow (now +
      // io_timeout per statement), so most statements cost no wake-up and no context switch; the
      // thread, waking at its own time, sees this entry then.
      cv_.notify_all();
    }
  }
  return armed(*this, id);
}

deadline_timer::armed::~armed() {
  if (!timer_) return;
  std::lock_guard lock(timer_->mutex_);
  timer_->entries_.erase(id_);
}

bool deadline_timer::armed::fired() const {
  if (!timer_) return false;
  std::lock_guard lock(timer_->mutex_);
  auto it = timer_->entries_.find(id_);
  return it != timer_->entries_.end() && it->second.fired;
}

void deadline_timer::loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    auto next = std::chrono::steady_clock::time_point::max();
    const auto now = std::chrono::steady_clock::now();
    for (auto& [id, e] : entries_) {
      if (e.fired) continue;
      if (e.deadline <= now) {
        // The statement is still running on it (the entry is removed under this mutex when it
        // returns), so the descriptor is still that connection's.
        ::shutdown(e.fd, SHUT_RDWR);
        e.fired = true;
      } else {
        next = std::min(next, e.deadline);
      }
    }
    sleeping_until_ = next;  // arm() wakes the thread for an earlier deadline only
    if (next == std::chrono::steady_clock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, next);
    }
  }
}

std::string split_brain_option(std::string_view provider_options) {
  // "a = b; pc.ignore_sb = true; ..." (Galera prints "key = value" pairs separated by "; ").
  for (const std::string_view key : {"pc.ignore_sb", "pc.ignore_quorum"}) {
    for (std::size_t at = provider_options.find(key); at != std::string_view::npos;
         at = provider_options.find(key, at + 1)) {
      if (at > 0 && provider_options[at - 1] != ' ' && provider_options[at - 1] != ';') continue;
      std::size_t i = at + key.size();
      while (i < provider_options.size() && provider_options[i] == ' ') ++i;
      if (i >= provider_options.size() || provider_options[i] != '=') continue;
      ++i;
      while (i < provider_options.size() && provider_options[i] == ' ') ++i;
      const std::string_view rest = provider_options.substr(i);
      for (const std::string_view yes : {"true", "TRUE", "True", "yes", "YES", "1", "on", "ON"}) {
        if (rest.substr(0, yes.size()) == yes &&
            (rest.size() == yes.size() || rest[yes.size()] == ';' || rest[yes.size()] == ' ')) {
          return std::string(key);
        }
      }
    }
  }
  return "";
}

void require_durable(const server_traits& t, bool allow) {
  std::string problem;
  if (t.wsrep_on && !t.galera_split_brain_option.empty()) {
    // Both halves of a partitioned cluster report Primary and accept writes: each could grant
    // the same name, with the same next token. No flush setting makes that safe.
    problem = "wsrep_provider_options " + t.galera_split_brain_option +
              " = true (both halves of a partitioned Galera cluster go on writing, so each could grant the same "
              "lock)";
    if (allow) return;
    throw database_error("mysql: the server runs with " + problem +
                             "; set it to false, or accept the risk with client_options::allow_unsafe_durability "
                             "(URL sqllock_allow_unsafe_durability=on)",
                         std::string(backend_name), "", "server_settings");
  }
  // Galera: durability from the cluster (see the header); only a power loss of every node at
  // once can lose the last second of commits.
  const bool replicated = t.wsrep_on && t.galera_cluster_size >= 2;
  if (replicated && (t.flush_log_at_trx_commit == 1 || t.flush_log_at_trx_commit == 2)) return;
  if (t.flush_log_at_trx_commit != 1) {
    problem = "innodb_flush_log_at_trx_commit = " + std::to_string(t.flush_log_at_trx_commit) +
              " (commits are flushed to disk only about once a second)";
  } else if (t.log_bin && t.sync_binlog != 1) {
    problem = "sync_binlog = " + std::to_string(t.sync_binlog) +
              " with the binary log on (crash recovery rolls back commits the binlog lost)";
  }
  if (problem.empty() || allow) return;
  throw database_error("mysql: the server runs with " + problem +
                           ", so an acknowledged acquisition can be lost in a crash and its fencing token "
                           "handed out again; set innodb_flush_log_at_trx_commit = 1 (and sync_binlog = 1 "
                           "where log_bin is on), or accept the risk with client_options::allow_unsafe_durability "
                           "(URL sqllock_allow_unsafe_durability=on)",
                       std::string(backend_name), "", "server_settings");
}

connection::connection(std::unique_ptr<sql::Connection> owned) : owned_(std::move(owned)), conn_(owned_.get()) {}

connection::connection(sql::Connection* borrowed) : conn_(borrowed) {}

connection::~connection() {
  cache_.clear();  // statements first: they belong to the connection
  if (owned_) {
    try {
      owned_->close();
    } catch (...) {
    }
  }
}

void connection::fail(const sql::SQLException& e, std::string_view statement, bool lock_table) {
  bool lost = is_connection_error(e.getErrorCode());
  if (!lost && e.getErrorCode() == 0) {
    try {
      lost = conn_->isClosed();
    } catch (...) {
      lost = true;
    }
  }
  if (lost) {
    broken_ = true;
    cache_.clear();
  }
  map_error(e, statement, lock_table);
}

sql::PreparedStatement& connection::prepare(std::string_view sql, std::string_view statement, bool lock_table) {
  if (auto it = cache_.find(sql); it != cache_.end()) return *it->second;
  if (cache_.size() >= max_cached_statements) cache_.clear();
  try {
    std::unique_ptr<sql::PreparedStatement> ps(conn_->prepareStatement(sql::SQLString(std::string(sql))));
    auto& ref = *ps;
    cache_.emplace(std::string(sql), std::move(ps));
    return ref;
  } catch (const sql::SQLException& e) {
    fail(e, statement, lock_table);
  }
}

namespace {

void bind(sql::PreparedStatement& ps, const std::vector<value>& params) {
  unsigned int i = 1;
  for (const value& v : params) {
    if (std::holds_alternative<std::monostate>(v)) {
      ps.setNull(i, sql::DataType::SQLNULL);
    } else if (const auto* n = std::get_if<std::int64_t>(&v)) {
      ps.setInt64(i, *n);
    } else if (const auto* d = std::get_if<double>(&v)) {
      ps.setDouble(i, *d);
    } else {
      ps.setString(i, sql::SQLString(std::get<std::string>(v)));
    }
    ++i;
  }
}

/// Whether a prepared statement produces a result set (its result metadata has columns).
bool returns_rows(sql::PreparedStatement& ps) {
  sql::ResultSetMetaData* meta = ps.getMetaData();  // owned by the statement
  return meta != nullptr && meta->getColumnCount() > 0;
}

result_rows read_rows(sql::ResultSet& rs) {
  result_rows rows;
  sql::ResultSetMetaData* meta = rs.getMetaData();  // owned by the result set
  const unsigned int n = meta->getColumnCount();
  while (rs.next()) {
    result_row row;
    row.columns.reserve(n);
    for (unsigned int c = 1; c <= n; ++c) {
      if (rs.isNull(c)) {
        row.columns.emplace_back(std::nullopt);
      } else {
        row.columns.emplace_back(rs.getString(c).asStdString());
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

std::int64_t connection::execute(std::string_view sql, const std::vector<value>& params, std::string_view statement,
                                 bool lock_table) {
  sql::PreparedStatement& ps = prepare(sql, statement, lock_table);
  try {
    bind(ps, params);
    last_used_ = std::chrono::steady_clock::now();
    if (returns_rows(ps)) {
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      std::int64_t n = 0;
      while (rs && rs->next()) ++n;
      return n;
    }
    // Prepared statements have no getUpdateCount() in Connector/C++ 1.1; executeUpdate() returns
    // mysql_stmt_affected_rows().
    const int n = ps.executeUpdate();
    return n < 0 ? 0 : n;
  } catch (const sql::SQLException& e) {
    fail(e, statement, lock_table);
  }
}

result_rows connection::query(std::string_view sql, const std::vector<value>& params, std::string_view statement,
                              bool lock_table) {
  sql::PreparedStatement& ps = prepare(sql, statement, lock_table);
  try {
    bind(ps, params);
    last_used_ = std::chrono::steady_clock::now();
    // execute(), not the prepare-time metadata: MariaDB announces no columns for
    // INSERT ... RETURNING until it runs.
    if (!ps.execute()) return {};
    std::unique_ptr<sql::ResultSet> rs(ps.getResultSet());
    if (!rs) return {};
    return read_rows(*rs);
  } catch (const sql::SQLException& e) {
    fail(e, statement, lock_table);
  }
}

void connection::run_simple(std::string_view sql, std::string_view statement) {
  try {
    last_used_ = std::chrono::steady_clock::now();
    std::unique_ptr<sql::Statement> st(conn_->createStatement());
    st->execute(sql::SQLString(std::string(sql)));
  } catch (const sql::SQLException& e) {
    fail(e, statement, false);
  }
}

const server_traits& connection::traits() {
  if (!traits_) {
    result_rows rows = query(statement_text("server_traits", "sqllock_locks"), {}, "server_traits");
    server_traits t;
    if (!rows.empty() && rows[0].size() >= 3) {
      const auto& v = rows[0][0];
      t.mariadb = v && v->find("MariaDB") != std::string::npos;
      if (v) std::sscanf(v->c_str(), "%d.%d", &t.major, &t.minor);
      t.rollback_on_timeout = rows[0][1] && (*rows[0][1] == "1" || *rows[0][1] == "ON");
      t.database = rows[0][2].value_or("");
    }
    for (const result_row& r : query(statement_text("server_durability", "sqllock_locks"), {}, "server_traits")) {
      const std::string name = r[0].value_or("");
      const std::string value = r[1].value_or("");
      if (name == "innodb_flush_log_at_trx_commit") t.flush_log_at_trx_commit = std::atoi(value.c_str());
      if (name == "sync_binlog") t.sync_binlog = std::atol(value.c_str());
      if (name == "log_bin") t.log_bin = value == "ON" || value == "1";
      if (name == "wsrep_on") t.wsrep_on = value == "ON" || value == "1";
      if (name == "wsrep_provider_options") t.galera_split_brain_option = split_brain_option(value);
      if (name == "read_only") t.read_only = value == "ON" || value == "1";
    }
    if (t.wsrep_on) {
      long size = 0;
      bool primary = false;
      for (const result_row& r : query(statement_text("server_galera", "sqllock_locks"), {}, "server_traits")) {
        const std::string name = r[0].value_or("");
        if (name == "wsrep_cluster_size") size = std::atol(r[1].value_or("0").c_str());
        if (name == "wsrep_cluster_status") primary = r[1].value_or("") == "Primary";
      }
      t.galera_cluster_size = primary ? size : 0;
    }
    traits_ = std::move(t);
  }
  return *traits_;
}

bool connection::alive() {
  if (broken_) return false;
  if (socket_fd_ < 0) {
    if (std::chrono::steady_clock::now() - last_used_ < std::chrono::seconds(1)) return true;
    try {
      return conn_->isValid();
    } catch (...) {
      return false;
    }
  }
  pollfd p{socket_fd_, POLLIN, 0};
  const int n = ::poll(&p, 1, 0);
  if (n == 0) return true;  // nothing pending: an idle, open connection
  if (n < 0) return errno == EINTR;
  // End of file, an error, or an unsolicited packet (the server's "connection killed" error before
  // it closes): the server ended the session; nothing was sent on it, so nothing is lost.
  char c;
  const ssize_t got = ::recv(socket_fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

std::unique_ptr<connection> connection_pool::take() {
  // A connection that idled may have been dropped by the server (restart, wait_timeout, KILL).
  if (auto c = idle_.take([](std::unique_ptr<connection>& p) { return p->alive(); })) return std::move(*c);
  int fd = -1;
  auto raw = open_connection(params_, /*found_rows=*/true, /*read_timeout_s=*/0, &fd);
  try {
    raw->setAutoCommit(false);
  } catch (const sql::SQLException& e) {
    map_error(e, "begin");
  }
  auto c = std::make_unique<connection>(std::move(raw));
  c->set_socket_fd(fd);
  return c;
}

void connection_pool::give_back(std::unique_ptr<connection> c) noexcept {
  if (!c || c->broken()) return;
  try {
    idle_.give_back(std::move(c));  // no room: destroyed (closed) there
  } catch (...) {
  }
}

}  // namespace sqllock::detail::mysql
