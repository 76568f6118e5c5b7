# `make deb` (cpack -G DEB in the build directory): build/softrdma_VERSION_ARCH.deb with
# bin/softrdma, the drop-in libraries in /usr/LIBDIR/softrdma/, the man page, bash completion and
# docs; and, when the plugin is built, build/softrdma-wireshark_VERSION_ARCH.deb with the
# Wireshark 4.0 plugin (a package of its own, so that softrdma does not depend on libwireshark).
# Version: project(VERSION). Depends: dpkg-shlibdeps on each package's ELF files (docs/install.md).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME softrdma)
set(CPACK_PACKAGE_VENDOR softrdma)
set(CPACK_PACKAGE_CONTACT "softrdma developers <softrdma@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# librdmacm.so.1 needs libibverbs.so.1, the package's own: not rdma-core's libibverbs1.
set(CPACK_SOFTRDMA_SHLIBDEPS ${CMAKE_CURRENT_LIST_DIR}/shlibdeps-own-verbs.sh)
set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_CURRENT_LIST_DIR}/cpack_project.cmake)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_STRIP_FILES ON)  # the build is RelWithDebInfo; the packages carry no debug info

set(CPACK_DEBIAN_SOFTRDMA_PACKAGE_NAME softrdma)
set(CPACK_DEBIAN_SOFTRDMA_DESCRIPTION
"software RDMA device (RoCEv2 and iWARP) in userspace
softrdma runs unmodified verbs and rdma_cm programs over a software RDMA device in
the program's own process (softrdma run -- PROGRAM), traces every packet to pcapng
and checks captures for protocol conformance (softrdma lint). No kernel module and
no RDMA hardware are needed. Its libibverbs.so.1 and librdmacm.so.1 live in a
private directory: programs not started by softrdma keep the system's rdma-core.")
set(CPACK_DEBIAN_SOFTRDMA_PACKAGE_SUGGESTS "ibverbs-utils, perftest, softrdma-wireshark")
set(CPACK_COMPONENTS_ALL softrdma)

if(TARGET softrdma_wireshark)
  list(APPEND CPACK_COMPONENTS_ALL wireshark)
  set(CPACK_DEBIAN_WIRESHARK_PACKAGE_NAME softrdma-wireshark)
  set(CPACK_DEBIAN_WIRESHARK_PACKAGE_ENHANCES wireshark)
  set(CPACK_DEBIAN_WIRESHARK_DESCRIPTION
"Wireshark 4.0 plugin for softrdma's traces
Verifies RoCEv2 ICRCs, decodes MPA revision 2 fields and makes softrdma's per-packet
annotations (direction, QP, injected fault, drop reason) filterable fields.")
endif()

include(CPack)
