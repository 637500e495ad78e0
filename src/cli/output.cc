// See output.hpp.
#include "output.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace opsight::cli {

void print_error(const std::string& message) {
  std::fprintf(stderr, "opsight: error: %s\n", message.c_str());
}

bool write_stdout(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    print_error(std::string("cannot write to standard output: ") + std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace opsight::cli
