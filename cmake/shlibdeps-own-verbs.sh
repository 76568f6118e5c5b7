#!/bin/sh
# dpkg-shlibdeps for cpack (cmake/package.cmake): the package's librdmacm.so.1 needs
# libibverbs.so.1, which the package holds itself; dpkg-shlibdeps cannot know that file and
# takes rdma-core's, so -x leaves libibverbs1 and librdmacm1 out of Depends.
exec dpkg-shlibdeps -xlibibverbs1 -xlibrdmacm1 "$@"
