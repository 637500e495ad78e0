// ASCII case folding for the server's case-insensitive matches (host names, the
// Authorization scheme, run search, timeline search). ASCII only, whatever the C locale:
// HTTP's tokens are ASCII, and a search folds only A-Z so that UTF-8 names stay intact.
#pragma once

#include <string>
#include <string_view>

namespace opsight::server {

inline char ascii_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

inline std::string ascii_lowercase(std::string_view text) {
  std::string lowered(text);
  for (char& c : lowered) c = ascii_lower(c);
  return lowered;
}

}  // namespace opsight::server
