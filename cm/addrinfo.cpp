// rdma_getaddrinfo / rdma_freeaddrinfo: name and service resolution through the
// system's getaddrinfo, shaped for rdma_create_ep (port space and QP type filled in).
#include <netdb.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

extern "C" {

int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                     rdma_addrinfo** res) {
  if (!res || (!node && !service)) {
    errno = EINVAL;
    return -1;
  }
  addrinfo h{};
  h.ai_socktype = SOCK_STREAM;
  int flags = hints ? hints->ai_flags : 0;
  if (flags & RAI_NUMERICHOST) h.ai_flags |= AI_NUMERICHOST;
  if (flags & RAI_PASSIVE) h.ai_flags |= AI_PASSIVE;
  h.ai_family = hints && (hints->ai_family == AF_INET || hints->ai_family == AF_INET6)
                    ? hints->ai_family
                    : AF_UNSPEC;
  addrinfo* ai = nullptr;
  int rc = getaddrinfo(node, service, &h, &ai);
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
  auto* r = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  auto* sa = static_cast<sockaddr*>(std::calloc(1, sizeof(sockaddr_storage)));
  if (!r || !sa) {
    std::free(r);
    std::free(sa);
    freeaddrinfo(ai);
    errno = ENOMEM;
    return EAI_MEMORY;
  }
  std::memcpy(sa, pick->ai_addr, pick->ai_addrlen);
  r->ai_flags = flags;
  r->ai_family = pick->ai_family;
  r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
  r->ai_port_space = hints && hints->ai_port_space
                         ? hints->ai_port_space
                         : (r->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP);
  if (flags & RAI_PASSIVE) {
    r->ai_src_addr = sa;
    r->ai_src_len = pick->ai_addrlen;
  } else {
    r->ai_dst_addr = sa;
    r->ai_dst_len = pick->ai_addrlen;
    if (hints && hints->ai_src_addr && hints->ai_src_len) {
      r->ai_src_addr = static_cast<sockaddr*>(std::calloc(1, sizeof(sockaddr_storage)));
      if (r->ai_src_addr) {
        std::memcpy(r->ai_src_addr, hints->ai_src_addr, hints->ai_src_len);
        r->ai_src_len = hints->ai_src_len;
      }
    }
  }
  freeaddrinfo(ai);
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
