// The byte stream over a connected kernel TCP socket (the fd the CM layer hands in):
// nonblocking send/sendmsg/recv, epoll on the socket itself, shutdown(SHUT_WR) for FIN and
// SO_LINGER 0 before close for RST.
#pragma once

#include <memory>

#include "iwarp/byte_stream.h"

namespace softrdma::iwarp {

// Wraps `fd` after making it nonblocking with TCP_NODELAY. 0, or EBADF when it is not a
// stream socket (`out` untouched), or the errno of fcntl.
int open_kernel_tcp_stream(int fd, std::unique_ptr<ByteStream>& out);

}  // namespace softrdma::iwarp
