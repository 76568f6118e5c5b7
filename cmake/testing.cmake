# softrdma_gtest(NAME LABEL SOURCES... LIBS ...): a GoogleTest binary registered with ctest under LABEL.
include(GoogleTest)
function(softrdma_gtest name label)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  gtest_discover_tests(${name} PROPERTIES LABELS ${label}
    ENVIRONMENT "SOFTRDMA_CONFORMANCE=${SOFTRDMA_CONFORMANCE};SOFTRDMA_BIN=${CMAKE_BINARY_DIR}/bin;TSHARK=${TSHARK};SYSTEM_PYTHON3=${SYSTEM_PYTHON3}"
    DISCOVERY_TIMEOUT 30)
endfunction()
