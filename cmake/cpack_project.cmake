# Read by cpack when it runs (CPACK_PROJECT_CONFIG_FILE): dpkg-shlibdeps through
# shlibdeps-own-verbs.sh, so that the drop-in libraries are not taken for rdma-core's.
set(SHLIBDEPS_EXECUTABLE "${CPACK_SOFTRDMA_SHLIBDEPS}" CACHE FILEPATH "dpkg-shlibdeps for softrdma" FORCE)
