// The compiled XDP program (roce_redirect.bpf.c, an ELF object for the BPF target), embedded by
// the build (cmake/embed_file.cmake) for AfXdpNetdev to load with bpf_object__open_mem.
#pragma once

#include <cstddef>

namespace softrdma::netdev {
extern const unsigned char kRoceRedirectBpf[];
extern const std::size_t kRoceRedirectBpfSize;
}  // namespace softrdma::netdev
