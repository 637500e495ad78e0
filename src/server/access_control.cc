#include "server/access_control.hpp"

#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "server/ascii_text.hpp"

namespace opsight::server {

bool is_loopback_host(std::string_view host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  if (!host.starts_with("127.")) return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return dots == 3;
}

std::string make_access_token() {
  std::random_device entropy;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (int word = 0; word < 4; ++word) {
    uint32_t bits = entropy();
    for (int nibble = 0; nibble < 8; ++nibble) token += kHex[(bits >> (nibble * 4)) & 0xf];
  }
  return token;
}

bool tokens_equal(std::string_view expected, std::string_view given) {
  if (expected.size() != given.size() || expected.empty()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    difference |= static_cast<unsigned char>(expected[i] ^ given[i]);
  return difference == 0;
}

std::string host_of_host_header(std::string_view host_header) {
  std::string_view host = host_header;
  if (host.starts_with("[")) {
    size_t close = host.find(']');
    if (close == std::string_view::npos) return "";
    std::string_view rest = host.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(":")) return "";
    host = host.substr(0, close + 1);
  } else if (size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    host = host.substr(0, colon);
  }
  if (host.ends_with(".")) host.remove_suffix(1);
  return ascii_lowercase(host);
}

bool is_address_literal(std::string_view host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    return std::all_of(host.begin() + 1, host.end() - 1, [](char c) {
      return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
    });
  }
  int dots = 0, digits = 0;
  for (char c : host) {
    if (c == '.') {
      if (digits == 0) return false;
      ++dots;
      digits = 0;
    } else if (c >= '0' && c <= '9' && ++digits <= 3) {
    } else {
      return false;
    }
  }
  return dots == 3 && digits > 0;
}

std::vector<std::string> machine_host_names() {
  std::vector<std::string> names;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return names;
  names.push_back(ascii_lowercase(name));
  addrinfo hints{};
  hints.ai_flags = AI_CANONNAME;
  addrinfo* found = nullptr;
  if (::getaddrinfo(name, nullptr, &hints, &found) == 0) {
    if (found != nullptr && found->ai_canonname != nullptr) {
      std::string canonical = ascii_lowercase(found->ai_canonname);
      if (canonical != names.front()) names.push_back(canonical);
    }
    ::freeaddrinfo(found);
  }
  return names;
}

bool loopback_host_header_allowed(std::string_view host_header) {
  std::string host = host_of_host_header(host_header);
  return !host.empty() && is_loopback_host(host);
}

bool remote_host_header_allowed(std::string_view host_header,
                                const std::vector<std::string>& allowed_names) {
  std::string host = host_of_host_header(host_header);
  if (host.empty()) return false;
  if (is_address_literal(host) || is_loopback_host(host)) return true;
  return std::any_of(allowed_names.begin(), allowed_names.end(), [&](const std::string& allowed) {
    return host_of_host_header(allowed) == host;
  });
}

std::optional<std::string> token_of_request(std::string_view authorization_header,
                                            std::string_view token_header,
                                            std::string_view token_parameter) {
  constexpr std::string_view kBearer = "bearer";
  if (authorization_header.size() > kBearer.size() &&
      ascii_lowercase(authorization_header.substr(0, kBearer.size())) == kBearer &&
      authorization_header[kBearer.size()] == ' ') {
    std::string_view credentials = authorization_header.substr(kBearer.size());
    while (credentials.starts_with(" ")) credentials.remove_prefix(1);
    if (!credentials.empty()) return std::string(credentials);
  }
  if (!token_header.empty()) return std::string(token_header);
  if (!token_parameter.empty()) return std::string(token_parameter);
  return std::nullopt;
}

}  // namespace opsight::server
