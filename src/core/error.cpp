// Constructors of the typed errors.
#include "sqllock/error.hpp"

#include <utility>

namespace sqllock {

error::error(const std::string& message, std::string backend, std::string code, std::string statement)
    : std::runtime_error(message),
      backend_(std::move(backend)),
      code_(std::move(code)),
      statement_(std::move(statement)) {}

acquire_timeout::acquire_timeout(const std::string& message, std::string lock_name, std::string holder,
                                 std::chrono::milliseconds time_left, std::string backend)
    : error(message, std::move(backend)), lock_name_(std::move(lock_name)), holder_(std::move(holder)), time_left_(time_left) {}

retries_exhausted::retries_exhausted(const std::string& message, int attempts) : error(message), attempts_(attempts) {}

}  // namespace sqllock
