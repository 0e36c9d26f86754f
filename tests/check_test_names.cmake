# Fails when a doctest binary holds a test case whose name has a semicolon. doctest's CTest
# discovery splits such a name in two, and each half's --test-case filter then matches no test
# case, so the case silently never runs under ctest (found 2026-12-02: seven cases had not run).
# usage: cmake -DBIN=<test binary> -P check_test_names.cmake
execute_process(COMMAND "${BIN}" --list-test-cases --no-version OUTPUT_VARIABLE out
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${BIN} --list-test-cases failed (${rc})")
endif()
string(REGEX MATCHALL "[^\n]*;[^\n]*" bad "${out}")
if(bad)
  message(FATAL_ERROR "${BIN}: test case names with a semicolon, which CTest would split and "
                      "never run; use a comma instead:\n${bad}")
endif()
string(FIND "${out}" "listing all test case names" listed)
if(listed EQUAL -1)
  message(FATAL_ERROR "${BIN} --list-test-cases printed no listing:\n${out}")
endif()
