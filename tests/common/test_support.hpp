// Helpers shared by the test programs (conformance, stories, backend-specific suites).
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace sqllock_testing {

/// A lock or table name unique to this test run: PREFIX_<pid>_<random>_<counter> (letters,
/// digits and underscores, valid as a lock name and as an SQL identifier).
std::string unique_name(const std::string& prefix);

/// Create or upgrade sqllock's tables at URL before a suite runs. Returns 0, or 2 after printing
/// why to stderr ("PROGRAM: cannot prepare the database: ..."): a suite fails, it never skips.
int prepare_database(const std::string& url, const std::string& program);

/// Polls `condition` every 5 ms until it holds or `limit` has passed; returns its last value. For
/// what another thread does soon but not at a known moment (a lease's on_lost and events are told
/// by the deciding thread after it lets go of the book's lock, so they may trail lost()).
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit);

}  // namespace sqllock_testing
