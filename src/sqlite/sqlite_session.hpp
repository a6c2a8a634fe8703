// SQLite transactions: a session over a pooled connection (or an adopted one).
#pragma once

#include <functional>
#include <memory>

#include "core/backend.hpp"

struct sqlite3;

namespace sqllock::detail::sqlite {

/// A transaction on `db`, handed back through `give_back(db, healthy)` when it ends.
std::unique_ptr<session> make_session(sqlite3* db, std::function<void(sqlite3*, bool)> give_back,
                                      const transaction_options& options, const client_options& log_options);

}  // namespace sqllock::detail::sqlite
