// Inventory helpers: conditional update, CAS and FOR UPDATE decrements with idempotency keys.
#include "sqllock/inventory.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>

#include "sqllock/error.hpp"
#include "sqllock/migrations.hpp"
#include "sqllock/parse.hpp"

namespace sqllock {
namespace {

using status = reserve_result::status;

dialect dialect_of(client& c) {
  const auto k = c.backend_name();
  if (k == "postgresql") return dialect::postgresql;
  if (k == "mysql") return dialect::mysql;
  return dialect::sqlite;
}

// A merged, sorted line: the key, its total quantity, and the request indices it stands for.
struct line {
  value key;
  std::string key_text;
  std::int64_t quantity = 0;
  std::size_t first_index = 0;
  std::vector<std::size_t> indices;
};

std::string key_text(const value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  throw invalid_argument("reserve: a key must be an integer or text (not NULL or floating point)");
}

std::vector<line> merge_lines(const std::vector<stock_item>& items) {
  if (items.empty()) throw invalid_argument("reserve: no items");
  std::map<value, line> by_key;  // std::variant orders by alternative, then value: deterministic
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& it = items[i];
    if (it.quantity < 1) throw invalid_argument("reserve: item " + std::to_string(i) + " has a quantity below 1");
    auto text = key_text(it.key);
    auto [pos, fresh] = by_key.try_emplace(it.key);
    line& l = pos->second;
    if (fresh) {
      l.key = it.key;
      l.key_text = std::move(text);
      l.first_index = i;
    }
    if (it.quantity > INT64_MAX - l.quantity) throw invalid_argument("reserve: quantity overflow");
    l.quantity += it.quantity;
    l.indices.push_back(i);
  }
  std::vector<line> out;
  for (auto& [k, l] : by_key) out.push_back(std::move(l));
  return out;
}

struct names {
  dialect d;
  std::string table, key, qty, version, idem;
};

names quoted(dialect d, const stock_table& t, const reserve_options& o) {
  names n{d,
          quote_identifier(t.table, d),
          quote_identifier(t.key_column, d),
          quote_identifier(t.quantity_column, d),
          t.version_column.empty() ? std::string() : quote_identifier(t.version_column, d),
          o.idempotency_key ? quote_identifier(o.idempotency_table, d) : std::string()};
  return n;
}

std::string request_hash(const stock_table& t, const std::vector<line>& lines) {
  std::string s = t.table + '\n' + t.key_column + '\n' + t.quantity_column + '\n';
  for (const auto& l : lines) {
    s += std::to_string(l.key.index()) + ':' + std::to_string(l.key_text.size()) + ':' + l.key_text + '=' +
         std::to_string(l.quantity) + '\n';
  }
  return sha256_hex(s);
}

const char* status_text(status s) {
  switch (s) {
    case status::applied:
      return "applied";
    case status::insufficient:
      return "insufficient";
    case status::not_found:
      return "not_found";
    case status::retries_exhausted:
      break;
  }
  return "retries_exhausted";
}

status parse_status(const std::string& s) {
  if (s == "applied") return status::applied;
  if (s == "insufficient") return status::insufficient;
  if (s == "not_found") return status::not_found;
  throw database_error("reserve: unknown outcome '" + s + "' in the idempotency table");
}

std::string join(const std::vector<std::int64_t>& v) {
  std::string s;
  for (auto x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

std::vector<std::int64_t> split_ints(const std::string& s) {
  std::vector<std::int64_t> out;
  std::size_t pos = 0;
  while (pos < s.size()) {
    auto comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    std::int64_t v = 0;
    std::from_chars(s.data() + pos, s.data() + comma, v);
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

// A result with the failure attributed to the first request index of the line.
reserve_result failed(status s, const line& l, std::int64_t available = 0) {
  reserve_result r;
  r.outcome = s;
  r.failed_item = l.first_index;
  r.available = available;
  return r;
}

std::int64_t int_of(const std::optional<std::string>& col) {
  result_row r;
  r.columns.push_back(col);
  return r.as_int(0);
}

// One run of the strategy inside `tx`. Returns the outcome; applied leaves the changes in tx.
// Throws version_conflict (CAS) or lock_not_available (row lock bound) to ask for another run.
//
// Why strategies can share a table (issue 10 item 9): every statement here that changes the
// quantity (a) bumps the version column when the table has one, so a version-checked writer,
// sqllock's or the user's own, sees the change as a conflict, and (b) is relative to the row
// (`qty = qty - n ... AND qty >= n`), never an absolute value computed from an earlier read, so
// even a writer that leaves the version alone cannot lose a decrement or make it oversell.
// Quantities reported back are read after the change, in the same transaction, from the row this
// transaction now holds locked: the value the database has, never an older snapshot's.
reserve_result run_strategy(transaction& tx, const names& n, const stock_table& t, const std::vector<line>& lines,
                            std::size_t request_size, stock_strategy strategy) {
  reserve_result r;
  r.outcome = status::applied;
  r.new_quantities.assign(request_size, 0);
  auto set_new = [&](const line& l, std::int64_t q) {
    for (auto i : l.indices) r.new_quantities[i] = q;
  };
  const std::string bump = n.version.empty() ? std::string() : ", " + n.version + " = " + n.version + " + 1";
  const std::string where_key = " WHERE " + n.key + " = ?";
  // Reads a row this transaction has changed (and so holds locked): every dialect shows its own
  // change, which was applied to the latest committed version.
  const std::string select_own = "SELECT " + n.qty + " FROM " + n.table + where_key;
  // The latest committed quantity, locked until this transaction ends. MySQL/MariaDB: a plain
  // SELECT would read the REPEATABLE READ snapshot, which may be older than what the UPDATE saw.
  // SQLite: the transaction holds the write lock already.
  const std::string select_latest = "SELECT " + n.key + ", " + n.qty + " FROM " + n.table + where_key +
                                    (n.d == dialect::sqlite ? "" : " FOR UPDATE");
  // The row a line names, as the database stored its key: keys the database calls equal (MariaDB's
  // case-insensitive, PAD SPACE collations: "Sku-1", "sku-1", "Sku-1 ") read the same stored key.
  const std::string select_stored_key = "SELECT " + n.key + " FROM " + n.table + where_key;
  switch (strategy) {
    case stock_strategy::atomic_update:
    case stock_strategy::for_update: {
      if (strategy == stock_strategy::for_update) {
        // Lock every row first, in the database's key order (the same for every caller), then
        // decrement. The conditional update below re-checks each quantity with the database's own
        // key comparison (a case-insensitive collation may fold two request keys into one row).
        std::vector<value> keys;
        for (const auto& l : lines) keys.push_back(l.key);
        auto locked = tx.lock_rows({.table = t.table,
                                    .key_column = t.key_column,
                                    .keys = keys,
                                    .columns = {t.key_column},
                                    .mode = lock_wait::wait,
                                    .strength = lock_strength::update,
                                    .timeout = std::nullopt});
        if (!locked.acquired()) throw lock_not_available("reserve: the stock rows were not available in time");
      }
      const std::string update =
          "UPDATE " + n.table + " SET " + n.qty + " = " + n.qty + " - ?" + bump + where_key + " AND " + n.qty + " >= ?";
      for (std::size_t i = 0; i < lines.size(); ++i) {
        const auto& l = lines[i];
        if (tx.execute(update, {l.quantity, l.key, l.quantity}) < 1) {
          // Refused: decide on the latest committed row, locked so the answer stays true until
          // this transaction ends. A row that gained stock since the UPDATE looked is ours now.
          auto rows = tx.query(select_latest, {l.key});
          if (rows.empty()) return failed(status::not_found, l);
          const auto q = rows[0].as_int(1);
          if (q < l.quantity) {
            // Earlier lines of this request that name the same row (keys the database calls
            // equal) took from it already: the refusal is the row's, answered with its committed
            // quantity and the request's first item of that row (the rare path: one read a line).
            const auto stored = rows[0][0].value_or("");
            std::int64_t taken = 0;
            std::size_t first = l.first_index;
            for (std::size_t j = 0; j < i; ++j) {
              auto other = tx.query(select_stored_key, {lines[j].key});
              if (!other.empty() && other[0][0].value_or("") == stored) {
                taken += lines[j].quantity;
                first = std::min(first, lines[j].first_index);
              }
            }
            auto refusal = failed(status::insufficient, l, q + taken);
            refusal.failed_item = first;
            return refusal;
          }
          if (tx.execute(update, {l.quantity, l.key, l.quantity}) < 1) {
            throw serialization_failure("reserve: the stock row changed under its lock");
          }
        }
      }
      // Read after every update, so that lines naming one row all report what it has left.
      for (const auto& l : lines) {
        auto rows = tx.query(select_own, {l.key});
        if (rows.empty()) throw serialization_failure("reserve: the stock row vanished after its update");
        set_new(l, rows[0].as_int(0));
      }
      return r;
    }
    case stock_strategy::optimistic_cas: {
      // Read each line's row with its stored key. Lines whose keys the database calls equal (a
      // case-insensitive or PAD SPACE collation: "Sku-1", "sku-1", "Sku-1 ") read the same stored
      // key: they are one item of the row, merged like repeated keys, checked against the row's
      // quantity as a whole and swapped once (two swaps of one row under one read version would
      // conflict with each other on every run). The database decides equality, not sqllock.
      const std::string read =
          "SELECT " + n.key + ", " + n.qty + ", " + n.version + " FROM " + n.table + where_key;
      struct row_item {
        const line* first_line = nullptr;  // the line whose key is bound for the swap
        std::int64_t quantity = 0;         // the merged lines' total
        std::int64_t version = 0;
        std::size_t first_index = 0;       // the request's first item of the row
        std::vector<const line*> members;
      };
      std::vector<row_item> items;
      std::map<std::string, std::size_t> by_stored_key;
      for (const auto& l : lines) {
        auto got = tx.query(read, {l.key});
        if (got.empty()) return failed(status::not_found, l);
        const auto [pos, fresh] = by_stored_key.try_emplace(got[0][0].value_or(""), items.size());
        if (fresh) items.push_back({&l, 0, got[0].as_int(2), l.first_index, {}});
        row_item& it = items[pos->second];
        if (l.quantity > INT64_MAX - it.quantity) throw invalid_argument("reserve: quantity overflow");
        it.quantity += l.quantity;
        it.first_index = std::min(it.first_index, l.first_index);
        it.members.push_back(&l);
        const auto qty = got[0].as_int(1);
        if (qty < it.quantity) {
          auto refusal = failed(status::insufficient, l, qty);
          refusal.failed_item = it.first_index;
          return refusal;
        }
      }
      // The compare-and-swap is relative: the version check makes it optimistic (a change since
      // the read is a conflict and the whole transaction runs again), the quantity is taken from
      // the row as it is and never goes below 0.
      const std::string cas = "UPDATE " + n.table + " SET " + n.qty + " = " + n.qty + " - ?" + bump + where_key +
                              " AND " + n.version + " = ? AND " + n.qty + " >= ?";
      for (const auto& it : items) {
        if (tx.execute(cas, {it.quantity, it.first_line->key, it.version, it.quantity}) < 1) {
          // Another version, too little left, or gone: the next run reads again and decides.
          throw version_conflict("reserve: the stock row changed since it was read");
        }
        auto rows = tx.query(select_own, {it.first_line->key});
        if (rows.empty()) throw serialization_failure("reserve: the stock row vanished after its update");
        for (const auto* m : it.members) set_new(*m, rows[0].as_int(0));
      }
      return r;
    }
  }
  return r;
}

// The retry helper's jittered back-off (retry_backoff_sleep), with this request's bounds.
void backoff(const reserve_options& o, int attempt) {
  retry_policy policy;
  policy.backoff_min = o.backoff_min;
  policy.backoff_max = o.backoff_max;
  retry_backoff_sleep(policy, attempt);
}

// What the idempotency table's `quantities` column keeps, by merged line (sorted keys), so that a
// replay answers for the request it is given, whose items may come in another order or be split
// differently (the same merged lines, so the same hash): "L:q0,q1,..." (applied: each line's new
// quantity) or "F:k" (refused: line k failed). Rows written before had the quantities in their own
// request's order and no prefix.
std::string stored_lines(const reserve_result& r, const std::vector<line>& lines) {
  if (r.outcome == status::applied) {
    std::vector<std::int64_t> per_line;
    for (const auto& l : lines) per_line.push_back(r.new_quantities.at(l.first_index));
    return "L:" + join(per_line);
  }
  for (std::size_t k = 0; k < lines.size(); ++k) {
    if (lines[k].first_index == r.failed_item) return "F:" + std::to_string(k);
  }
  return std::string();
}

// The stored outcome of an idempotency key, if any (a fresh transaction), for this request.
std::optional<reserve_result> stored_outcome(client& c, const names& n, const reserve_options& o,
                                             const std::string& hash, const std::vector<line>& lines,
                                             std::size_t request_size) {
  auto tx = c.begin(o.transaction);
  auto rows = tx.query(
      "SELECT request_hash, outcome, failed_item, available, quantities FROM " + n.idem + " WHERE idem_key = ?",
      {*o.idempotency_key});
  tx.commit();
  if (rows.empty()) return std::nullopt;
  const auto& row = rows[0];
  if (row[0].value_or("") != hash) {
    throw invalid_argument("reserve: the idempotency key was already used for a different request");
  }
  reserve_result r;
  r.outcome = parse_status(row[1].value_or(""));
  r.failed_item = static_cast<std::size_t>(row[2] ? int_of(row[2]) : 0);
  r.available = row[3] ? int_of(row[3]) : 0;
  const std::string q = row[4].value_or("");
  const auto different = [] {
    return invalid_argument("reserve: the idempotency key was already used for a request with other items");
  };
  if (q.starts_with("L:")) {
    const auto per_line = split_ints(q.substr(2));
    if (r.outcome != status::applied || per_line.size() != lines.size()) throw different();
    r.new_quantities.assign(request_size, 0);
    for (std::size_t k = 0; k < lines.size(); ++k) {
      for (auto i : lines[k].indices) r.new_quantities[i] = per_line[k];
    }
  } else if (q.starts_with("F:")) {
    const auto k = split_ints(q.substr(2));
    if (k.size() != 1 || k[0] < 0 || static_cast<std::size_t>(k[0]) >= lines.size()) throw different();
    r.failed_item = lines[static_cast<std::size_t>(k[0])].first_index;
  } else {
    // Written by an older version, in its own request's order: usable only if it fits this one.
    r.new_quantities = split_ints(q);
    if ((r.outcome == status::applied && r.new_quantities.size() != request_size) ||
        (r.outcome != status::applied && r.failed_item >= request_size)) {
      throw different();
    }
  }
  r.replayed = true;
  return r;
}

void validate(const stock_table& t, const reserve_options& o) {
  validate_identifier(t.table);
  validate_identifier(t.key_column);
  validate_identifier(t.quantity_column);
  if (!t.version_column.empty()) validate_identifier(t.version_column);
  if (o.strategy == stock_strategy::optimistic_cas && t.version_column.empty()) {
    throw invalid_argument("reserve: optimistic_cas needs a version column (stock_table::version_column is empty)");
  }
  if (o.max_attempts < 1) throw invalid_argument("reserve: max_attempts must be at least 1");
  if (o.idempotency_key) {
    validate_identifier(o.idempotency_table);
    if (o.idempotency_key->empty() || o.idempotency_key->size() > 255) {
      throw invalid_argument("reserve: the idempotency key must be 1 to 255 bytes");
    }
  }
}

}  // namespace

std::int64_t reserve_result::new_quantity() const {
  if (outcome != status::applied || new_quantities.empty()) {
    throw invalid_argument("reserve: no new quantity: the reservation was not applied");
  }
  return new_quantities.front();
}

reserve_result decrement(client& c, const stock_table& table, const value& key, std::int64_t quantity,
                         const reserve_options& options) {
  return reserve(c, table, {stock_item{key, quantity}}, options);
}

reserve_result reserve(client& c, const stock_table& table, const std::vector<stock_item>& items,
                       const reserve_options& o) {
  validate(table, o);
  const auto lines = merge_lines(items);
  const dialect d = dialect_of(c);
  const names n = quoted(d, table, o);
  const std::string hash = o.idempotency_key ? request_hash(table, lines) : std::string();
  // Claiming a key never raises a unique violation (no "duplicate key" line in the server log):
  // a key that exists already is simply not inserted, and 0 affected rows says so.
  const std::string insert_key =
      !o.idempotency_key
          ? std::string()
          : std::string(d == dialect::mysql ? "INSERT IGNORE INTO " : "INSERT INTO ") + n.idem +
                " (idem_key, request_hash, outcome, failed_item, available, quantities) VALUES (?, ?, ?, ?, ?, ?)" +
                (d == dialect::mysql ? "" : " ON CONFLICT (idem_key) DO NOTHING");

  for (int attempt = 1;; ++attempt) {
    bool duplicate = false;
    try {
      auto tx = c.begin(o.transaction);
      if (o.idempotency_key) {
        // Claim the key first: a concurrent request with the same key waits on it here, inserts
        // nothing once this one commits, and then reads the outcome this one stores.
        duplicate = tx.execute(insert_key, {*o.idempotency_key, hash, std::string("pending"), std::int64_t{0},
                                            std::int64_t{0}, std::string()}) == 0;
      }
      if (!duplicate) {
        reserve_result r = run_strategy(tx, n, table, lines, items.size(), o.strategy);
        r.attempts = attempt;
        if (r.outcome != status::applied) {
          // Nothing may change but the stored outcome: undo, then store it on its own.
          tx.rollback();
          if (!o.idempotency_key) return r;
          auto tx2 = c.begin(o.transaction);
          duplicate = tx2.execute(insert_key,
                                  {*o.idempotency_key, hash, std::string(status_text(r.outcome)),
                                   static_cast<std::int64_t>(r.failed_item), r.available, stored_lines(r, lines)}) == 0;
          tx2.commit();
          if (!duplicate) return r;
        } else {
          if (o.idempotency_key) {
            tx.execute("UPDATE " + n.idem + " SET outcome = ?, quantities = ? WHERE idem_key = ?",
                       {std::string("applied"), stored_lines(r, lines), *o.idempotency_key});
          }
          tx.commit();
          return r;
        }
      }
    } catch (const retryable_error&) {
    } catch (const lock_not_available&) {
      // A bounded row-lock wait ran out: another run, like a conflict.
    }
    if (duplicate) {
      if (auto r = stored_outcome(c, n, o, hash, lines, items.size())) {
        r->attempts = attempt;
        return *r;
      }
      // The other request rolled back after all: run again.
    }
    if (attempt >= o.max_attempts) {
      reserve_result r;
      r.outcome = status::retries_exhausted;
      r.attempts = attempt;
      return r;
    }
    backoff(o, attempt);
  }
}

void create_idempotency_table(client& c, const std::string& table) {
  validate_identifier(table);
  const dialect d = dialect_of(c);
  const std::string t = quote_identifier(table, d);
  std::string ddl;
  switch (d) {
    case dialect::postgresql:
      ddl = "CREATE TABLE IF NOT EXISTS " + t +
            " (idem_key text PRIMARY KEY, request_hash text NOT NULL, outcome text NOT NULL,"
            " failed_item bigint NOT NULL DEFAULT 0, available bigint NOT NULL DEFAULT 0, quantities text NOT NULL,"
            " created_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP)";
      break;
    case dialect::mysql:
      ddl = "CREATE TABLE IF NOT EXISTS " + t +
            " (idem_key VARBINARY(255) NOT NULL PRIMARY KEY, request_hash CHAR(64) NOT NULL, outcome VARCHAR(32) NOT "
            "NULL,"
            " failed_item BIGINT NOT NULL DEFAULT 0, available BIGINT NOT NULL DEFAULT 0, quantities TEXT NOT NULL,"
            " created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB";
      break;
    case dialect::sqlite:
      ddl = "CREATE TABLE IF NOT EXISTS " + t +
            " (idem_key TEXT PRIMARY KEY, request_hash TEXT NOT NULL, outcome TEXT NOT NULL,"
            " failed_item INTEGER NOT NULL DEFAULT 0, available INTEGER NOT NULL DEFAULT 0, quantities TEXT NOT NULL,"
            " created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)";
      break;
  }
  if (c.schema_version() != client::required_schema_version()) c.migrate();  // schema_too_new when newer
  lease_options lease_opts;
  lease_opts.ttl = std::chrono::seconds(30);
  auto lease = c.acquire_for("sqllock:setup:" + table, std::chrono::minutes(1), lease_opts);
  auto tx = c.begin();
  tx.execute(ddl);
  tx.commit();
  lease.release();
}

}  // namespace sqllock
