// Who may use the UI server. Bound to a loopback address (the default), only this machine
// can connect, and a request must name the server by a loopback host (127.0.0.1, localhost,
// [::1]) so that a web page whose DNS name is rebound to 127.0.0.1 cannot read the API.
// Bound to any other address, the server makes a random token at start, prints it in the
// URL it opens, and every API call must carry it (header "Authorization: Bearer TOKEN",
// header "X-Opsight-Token: TOKEN" or query parameter "token"); tokens are compared in
// constant time. Such a server still checks the Host header: an address literal (which
// no DNS answer can rebind), a loopback name, the name it was bound to, this machine's
// host name, or a name the user allowed (`opsight ui --allow-host`).
//
// Thread-safety: pure functions, except make_access_token (reads the system's entropy)
// and machine_host_names (asks the system).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace opsight::server {

// 127.0.0.1 (any 127.x.y.z), ::1, [::1] or localhost.
bool is_loopback_host(std::string_view host);

// 32 lowercase hex digits (128 bits) from std::random_device.
std::string make_access_token();

// Whether `given` equals `expected`, in time that depends only on their lengths.
bool tokens_equal(std::string_view expected, std::string_view given);

// Whether a loopback-bound server accepts a request whose Host header is `host_header`:
// a loopback host, with or without a port.
bool loopback_host_header_allowed(std::string_view host_header);

// The host part of a Host header ("name:port", "[v6]:port", "name"), lowercased and
// without a trailing dot; "" when the header is malformed.
std::string host_of_host_header(std::string_view host_header);

// Whether `host` (as host_of_host_header gives it) is an IPv4 or bracketed IPv6 literal.
bool is_address_literal(std::string_view host);

// This machine's host name and its canonical name (lowercased; those the system knows).
std::vector<std::string> machine_host_names();

// Whether a server bound to a non-loopback address accepts a request whose Host header is
// `host_header`: an address literal, a loopback name, or one of `allowed_names` (the bound
// name, the machine's names, the user's); names compare case-insensitively.
bool remote_host_header_allowed(std::string_view host_header,
                                const std::vector<std::string>& allowed_names);

// The token a request carries: from "Authorization: Bearer X" (the scheme in any case, as
// RFC 6750 and RFC 9110 say, then one or more spaces), "X-Opsight-Token: X" or the query
// parameter, in that order of preference (empty strings mean absent).
std::optional<std::string> token_of_request(std::string_view authorization_header,
                                            std::string_view token_header,
                                            std::string_view token_parameter);

}  // namespace opsight::server
