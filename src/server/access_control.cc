#include "server/access_control.hpp"

#include <random>

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

bool loopback_host_header_allowed(std::string_view host_header) {
  std::string_view host = host_header;
  if (host.starts_with("[")) {
    size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    std::string_view rest = host.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(":")) return false;
    host = host.substr(0, close + 1);
  } else if (size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    host = host.substr(0, colon);
  }
  return is_loopback_host(host);
}

std::optional<std::string> token_of_request(std::string_view authorization_header,
                                            std::string_view token_header,
                                            std::string_view token_parameter) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization_header.starts_with(kBearer))
    return std::string(authorization_header.substr(kBearer.size()));
  if (!token_header.empty()) return std::string(token_header);
  if (!token_parameter.empty()) return std::string(token_parameter);
  return std::nullopt;
}

}  // namespace opsight::server
