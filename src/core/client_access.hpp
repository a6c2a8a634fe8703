// Unit tests only: a sqllock::client on a backend the test built (the fake backend), so that the
// recipes built on the public client (leader_latch ...) can be driven as the engine's unit tests
// drive the engine. The library itself never uses it: connect() is how clients are made.
#pragma once

#include <memory>
#include <utility>

#include "core/backend.hpp"
#include "sqllock/client.hpp"

namespace sqllock::detail {

struct client_access {
  static client make(std::unique_ptr<backend> b, const client_options& options) {
    return client(std::move(b), options);
  }
};

}  // namespace sqllock::detail
