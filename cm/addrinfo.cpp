// rdma_getaddrinfo / rdma_freeaddrinfo: name and service resolution through the
// system's getaddrinfo, shaped for rdma_create_ep (port space and QP type filled in).
// As in rdma-core (librdmacm/addrinfo.c): with neither node nor service, the addresses,
// QP type and port space come from the hints (libfabric's verbs provider resolves that way),
// and a source address in the hints is taken when the lookup gave none.
#include <netdb.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace {

// A copy of `len` bytes of `src` in malloc'd memory (what rdma_freeaddrinfo frees), or
// nullptr when out of memory.
sockaddr* copy_addr(const sockaddr* src, socklen_t len) {
  auto* sa = static_cast<sockaddr*>(
      std::calloc(1, len < sizeof(sockaddr_storage) ? sizeof(sockaddr_storage) : len));
  if (sa) std::memcpy(sa, src, len);
  return sa;
}

int default_port_space(int qp_type) {
  return qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP;
}

// Fills `r` from getaddrinfo(node, service); returns 0, or getaddrinfo's error (errno set).
int lookup(const char* node, const char* service, const rdma_addrinfo* hints, rdma_addrinfo* r) {
  const int flags = hints ? hints->ai_flags : 0;
  addrinfo h{};
  if (flags & RAI_NUMERICHOST) h.ai_flags |= AI_NUMERICHOST;
  if (flags & RAI_PASSIVE) h.ai_flags |= AI_PASSIVE;
  h.ai_family = hints && (hints->ai_family == AF_INET || hints->ai_family == AF_INET6)
                    ? hints->ai_family
                    : AF_UNSPEC;
  const int qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
  h.ai_socktype = qp_type == IBV_QPT_UD ? SOCK_DGRAM : SOCK_STREAM;
  addrinfo* ai = nullptr;
  const int rc = getaddrinfo(node, service, &h, &ai);
  if (rc != 0) {
    errno = rc == EAI_SYSTEM ? errno : ENOENT;
    return rc;
  }
  // Prefer IPv4 (the device's GIDs are IPv4-mapped unless configured otherwise).
  addrinfo* pick = ai;
  for (addrinfo* p = ai; p; p = p->ai_next) {
    if (p->ai_family == AF_INET) {
      pick = p;
      break;
    }
  }
  sockaddr* sa = copy_addr(pick->ai_addr, pick->ai_addrlen);
  if (!sa) {
    freeaddrinfo(ai);
    errno = ENOMEM;
    return EAI_MEMORY;
  }
  r->ai_flags = flags;
  r->ai_family = pick->ai_family;
  r->ai_qp_type = qp_type;
  r->ai_port_space =
      hints && hints->ai_port_space ? hints->ai_port_space : default_port_space(qp_type);
  if (flags & RAI_PASSIVE) {
    r->ai_src_addr = sa;
    r->ai_src_len = pick->ai_addrlen;
  } else {
    r->ai_dst_addr = sa;
    r->ai_dst_len = pick->ai_addrlen;
  }
  freeaddrinfo(ai);
  return 0;
}

}  // namespace

extern "C" {

int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                     rdma_addrinfo** res) {
  if (!res || (!node && !service && !hints)) {
    errno = EINVAL;
    return -1;
  }
  auto* r = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (!r) {
    errno = ENOMEM;
    return -1;
  }
  if (node || service) {
    const int rc = lookup(node, service, hints, r);
    if (rc != 0) {
      std::free(r);
      return rc;
    }
  } else {
    r->ai_flags = hints->ai_flags;
    r->ai_family = hints->ai_family;
    r->ai_qp_type = hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
    r->ai_port_space =
        hints->ai_port_space ? hints->ai_port_space : default_port_space(r->ai_qp_type);
    if (hints->ai_dst_addr && hints->ai_dst_len) {
      r->ai_dst_addr = copy_addr(hints->ai_dst_addr, hints->ai_dst_len);
      r->ai_dst_len = hints->ai_dst_len;
      if (!r->ai_dst_addr) {
        std::free(r);
        errno = ENOMEM;
        return -1;
      }
      if (!r->ai_family) r->ai_family = hints->ai_dst_addr->sa_family;
    }
  }
  if (!r->ai_src_addr && hints && hints->ai_src_addr && hints->ai_src_len) {
    r->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
    r->ai_src_len = hints->ai_src_len;
    if (!r->ai_src_addr) {
      rdma_freeaddrinfo(r);
      errno = ENOMEM;
      return -1;
    }
    if (!r->ai_family) r->ai_family = hints->ai_src_addr->sa_family;
  }
  *res = r;
  return 0;
}

void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res->ai_route);
    std::free(res->ai_connect);
    std::free(res);
    res = next;
  }
}

}  // extern "C"
