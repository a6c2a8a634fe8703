// Adopting an application's open MySQL Connector/C++ connection (no cppconn headers needed here).
#pragma once

#include "sqllock/export.hpp"

#include "sqllock/transaction.hpp"

namespace sql {
class Connection;
}

namespace sqllock {

/// A transaction handle over the application's own sql::Connection and its current transaction
/// (autocommit must be off for row locks to outlive a statement): CAS, row locks and statements
/// run there, nothing is begun or committed by sqllock (commit() and rollback() only end the
/// handle), and the connection is never closed by sqllock. Throws invalid_argument for null.
SQLLOCK_EXPORT transaction adopt(sql::Connection* connection);

}  // namespace sqllock
