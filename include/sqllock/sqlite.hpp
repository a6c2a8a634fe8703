// Adopting an application's open SQLite connection (no sqlite3.h needed here).
#pragma once

#include "sqllock/export.hpp"

#include "sqllock/transaction.hpp"

struct sqlite3;

namespace sqllock {

/// A transaction handle over the application's own connection and its current transaction:
/// CAS, row locks and statements run there, nothing is begun or committed by sqllock (commit()
/// and rollback() only end the handle), and the connection is never closed by sqllock.
/// Throws invalid_argument for a null handle.
SQLLOCK_EXPORT transaction adopt(sqlite3* connection);

}  // namespace sqllock
