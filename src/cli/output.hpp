// How every `opsight` command's errors and reports reach the terminal.
#pragma once

#include <string>

namespace opsight::cli {

// "opsight: error: <message>" on stderr.
void print_error(const std::string& message);
// Writes a report to stdout; false (after saying so) if it could not be written.
bool write_stdout(const std::string& text);

}  // namespace opsight::cli
