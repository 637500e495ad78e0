// The installed `opsight`: `opsight devices` lists what NVML reports, and nothing else.
#include "cli/devices_command.hpp"

namespace opsight::cli {

DevicesSourceOpener devices_source_of_this_build() { return open_nvml_devices_source; }

}  // namespace opsight::cli
