// Umbrella header: the whole public API except the per-driver adoption headers.
#pragma once

#include "sqllock/client.hpp"
#include "sqllock/error.hpp"
#include "sqllock/events.hpp"
#include "sqllock/leader.hpp"
#include "sqllock/multi_lock.hpp"
#include "sqllock/parse.hpp"
#include "sqllock/transaction.hpp"
#include "sqllock/value.hpp"
