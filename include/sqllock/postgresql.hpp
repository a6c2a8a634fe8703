// Adopting an application's open PostgreSQL connection (no libpq-fe.h needed here).
#pragma once

#include "sqllock/export.hpp"

#include "sqllock/transaction.hpp"

struct pg_conn;  // libpq's PGconn

namespace sqllock {

/// A transaction handle over the application's own PGconn and its current transaction:
/// CAS, row locks and statements run there, nothing is begun or committed by sqllock (commit()
/// and rollback() only end the handle), and the connection is never closed by sqllock.
/// Throws invalid_argument for a null or broken handle.
SQLLOCK_EXPORT transaction adopt(pg_conn* connection);

}  // namespace sqllock
