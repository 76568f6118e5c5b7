# softrdma_gtest(NAME LABEL SOURCES... LIBS ...): a GoogleTest binary registered with ctest under LABEL.
# Tests find the build's binaries and tshark through compile definitions
# (SOFTRDMA_BIN_DIR, SOFTRDMA_TSHARK); SOFTRDMA_CONFORMANCE comes from the environment
# (gtest_discover_tests in CMake 3.25 cannot pass more than one variable).
include(GoogleTest)
function(softrdma_gtest name label)
  cmake_parse_arguments(ARG "" "FILTER" "SOURCES;LIBS" ${ARGN})
  # FILTER: a --gtest_filter for the tests registered under `label` (the others may be
  # registered again under another label, as rxe's timing-bound incast tests are under soak).
  if(NOT ARG_FILTER)
    set(ARG_FILTER "*")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE SOFTRDMA_BIN_DIR="${CMAKE_BINARY_DIR}/bin"
                                             SOFTRDMA_TSHARK="${TSHARK}")
  gtest_discover_tests(${name} TEST_FILTER "${ARG_FILTER}" PROPERTIES LABELS ${label}
    ENVIRONMENT "SOFTRDMA_CONFORMANCE=${SOFTRDMA_CONFORMANCE}"
    DISCOVERY_TIMEOUT 30)
endfunction()
