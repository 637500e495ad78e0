# The build's check of the one-way data flow (docs/architecture.md): every `#include
# "<folder>/..."` in a module's library code (src/<module>/, tests, benchmarks and fuzzers
# aside) names its own folder, `schema` (which every module may use), or a module it links
# (its DEPS, and theirs). Run by the opsight_layering target of every build, after any
# source changes; a new upward or sideways include fails the build, naming the file, the
# line and what the module may use.
#   cmake -DSOURCE_DIR=... -DLAYERS_FILE=... -DSTAMP=... -P cmake/check_layering.cmake
# LAYERS_FILE: one line per module, "name:dep;dep;..." (the closure of its opsight_ DEPS),
# written at configure time by CMakeLists.txt.
cmake_minimum_required(VERSION 3.20)
file(STRINGS "${LAYERS_FILE}" layer_lines)
set(modules "")
foreach(line IN LISTS layer_lines)
  string(REPLACE ":" ";" parts "${line}")
  list(GET parts 0 module)
  list(REMOVE_AT parts 0)
  set(allowed_${module} ${parts})
  list(APPEND modules ${module})
endforeach()
file(GLOB folders RELATIVE "${SOURCE_DIR}/src" "${SOURCE_DIR}/src/*")
set(problems "")
foreach(module IN LISTS modules)
  file(GLOB_RECURSE sources RELATIVE "${SOURCE_DIR}"
    "${SOURCE_DIR}/src/${module}/*.cc" "${SOURCE_DIR}/src/${module}/*.hpp")
  list(FILTER sources EXCLUDE REGEX "(_test|_tests|_benchmark|_fuzzer|_fuzz_seeds|_for_tests)\\.(cc|hpp)$")
  list(FILTER sources EXCLUDE REGEX "/test_support|_test_files\\.hpp$")
  foreach(source IN LISTS sources)
    file(STRINGS "${SOURCE_DIR}/${source}" includes REGEX "^#include \"[a-z_]+/")
    foreach(include IN LISTS includes)
      string(REGEX REPLACE "^#include \"([a-z_]+)/.*" "\\1" folder "${include}")
      if(NOT folder IN_LIST folders OR folder STREQUAL module OR folder STREQUAL "schema")
        continue()
      endif()
      if(NOT folder IN_LIST allowed_${module})
        string(REPLACE ";" ", " may "${allowed_${module}}")
        string(APPEND problems
          "  ${source}: ${include}: module '${module}' may use only: ${may} (and schema)\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "opsight: includes against the layering (docs/architecture.md; a "
    "module's DEPS in its CMakeLists.txt say what it may use):\n${problems}")
endif()
file(WRITE "${STAMP}" "")
