// URL helpers for the backends: secret parameters, and the URL rebuilt for a driver.
#pragma once

#include <string>
#include <string_view>

#include "sqllock/parse.hpp"

namespace sqllock::detail {

/// True for a query parameter whose value is a credential (password, sslpassword, ...): its value
/// is shown as *** by database_url::redacted() and scrubbed from messages.
bool is_secret_parameter(std::string_view key) noexcept;

/// The server URL rebuilt for a driver that parses URIs itself (libpq): every part percent-encoded,
/// so a password with '/', '?' or '@' reaches the driver as sqllock read it, and only the
/// parameters left in `url.params` (connect() removes the sqllock_ ones). Contains the password.
std::string driver_uri(const database_url& url);

/// Replace every occurrence of each secret of `url` (the password, secret parameters' values, in
/// plain and percent-encoded form as written) in `text` by "***".
void scrub_secrets(std::string& text, const database_url& url);

}  // namespace sqllock::detail
