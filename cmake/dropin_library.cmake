# softrdma_dropin_library(TARGET VERSION MAP): makes the shared library TARGET a drop-in for
# rdma-core's libTARGET.so.1 (its C ABI): soname .1 and file VERSION, only the symbols that MAP
# (beside the calling CMakeLists.txt) versions exported, no undefined symbols, and installed in
# softrdma's private library directory.
function(softrdma_dropin_library target version map)
  set(map ${CMAKE_CURRENT_SOURCE_DIR}/${map})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${target}
    VERSION ${version}
    SOVERSION 1
    LINK_DEPENDS ${map}
    CXX_VISIBILITY_PRESET hidden)
  target_link_options(${target} PRIVATE -Wl,--version-script=${map} -Wl,--no-undefined)
  # The public C API is declared in rdma-core's headers; its default visibility comes from the
  # version script, so internal C++ symbols stay local.
  target_compile_options(${target} PRIVATE -fvisibility=default)
  install(TARGETS ${target} LIBRARY DESTINATION ${SOFTRDMA_INSTALL_LIBDIR} NAMELINK_SKIP)
endfunction()
