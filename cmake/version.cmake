# Run at every build (not only at configure): writes the git SHA of the working tree into
# version.cc, with "-dirty" when there are uncommitted changes, and touches the file only
# when the text changes. Inputs: SRC (source dir), OUT (the .cc), VERSION.
set(sha "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${SRC}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --short=12 HEAD WORKING_DIRECTORY "${SRC}"
                  OUTPUT_VARIABLE sha OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0)
    set(sha "unknown")
  else()
    execute_process(COMMAND "${GIT_EXECUTABLE}" diff --quiet HEAD -- WORKING_DIRECTORY "${SRC}"
                    RESULT_VARIABLE dirty ERROR_QUIET)
    if(NOT dirty EQUAL 0)
      set(sha "${sha}-dirty")
    endif()
  endif()
endif()
set(text "// Generated at build time by cmake/version.cmake: provenance written into every report.
#include \"sim/version.h\"

namespace tpo {
const char* tool_version() { return \"${VERSION}\"; }
const char* git_sha() { return \"${sha}\"; }
}  // namespace tpo
")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
else()
  set(old "")
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
