// Derived row names: the lock-table rows of a reader-writer lock and of a semaphore's permits are
// "<prefix><bytes of L>.<L><suffix>", padded with '.' to 256 bytes. Lock names are at most 255
// bytes, so no lock name (and no user) can produce one; the length prefix makes it unambiguous for
// any L. rw_name.hpp and permit_name.hpp name the prefixes and suffixes.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace sqllock::detail {

/// The padded length of a derived row name: one more than the longest lock name.
inline constexpr std::size_t derived_row_min = 256;

/// "<prefix><bytes of name>.<name>" (not padded: the start of every derived name of `name`).
std::string derived_base(std::string_view prefix, std::string_view name);

/// `s` padded with '.' to derived_row_min bytes (unchanged when longer).
std::string derived_padded(std::string s);

/// If `row_name` is a padded derived name under `prefix`: the name it derives from and what
/// follows that name (the suffix and padding). Views into `row_name`.
std::optional<std::pair<std::string_view, std::string_view>> derived_parse(std::string_view prefix,
                                                                           std::string_view row_name);

}  // namespace sqllock::detail
