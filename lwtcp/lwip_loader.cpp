#include "lwtcp/lwip_loader.h"

#include <dlfcn.h>
#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>

#include "lwip/etharp.h"
#include "lwip/ethip6.h"
#include "lwip/init.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/priv/tcp_priv.h"  // tcp_abandon
#include "lwip/tcp.h"
#include "lwip/timeouts.h"
#include "netif/ethernet.h"
#include "wire/inet_sum.h"

// Every lwIP function lwtcp calls: return type, name, parameters, arguments.
#define SOFTRDMA_LWIP_FUNCTIONS(X)                                                                \
  X(err_t, etharp_output, (struct netif * n, struct pbuf * q, const ip4_addr_t* a), (n, q, a))    \
  X(err_t, ethernet_input, (struct pbuf * p, struct netif * n), (p, n))                           \
  X(err_t, ethip6_output, (struct netif * n, struct pbuf * q, const ip6_addr_t* a), (n, q, a))    \
  X(void, lwip_init, (void), ())                                                                  \
  X(struct netif*, netif_add,                                                                     \
    (struct netif * n, const ip4_addr_t* ip, const ip4_addr_t* mask, const ip4_addr_t* gw,        \
     void* state, netif_init_fn init, netif_input_fn input),                                      \
    (n, ip, mask, gw, state, init, input))                                                        \
  X(void, netif_create_ip6_linklocal_address, (struct netif * n, u8_t from_mac), (n, from_mac))   \
  X(void, netif_ip6_addr_set, (struct netif * n, s8_t i, const ip6_addr_t* a), (n, i, a))         \
  X(void, netif_ip6_addr_set_state, (struct netif * n, s8_t i, u8_t state), (n, i, state))        \
  X(void, netif_remove, (struct netif * n), (n))                                                  \
  X(void, netif_set_default, (struct netif * n), (n))                                             \
  X(void, netif_set_link_up, (struct netif * n), (n))                                             \
  X(void, netif_set_up, (struct netif * n), (n))                                                  \
  X(struct pbuf*, pbuf_alloc, (pbuf_layer l, u16_t len, pbuf_type t), (l, len, t))                \
  X(struct pbuf*, pbuf_alloced_custom,                                                            \
    (pbuf_layer l, u16_t len, pbuf_type t, struct pbuf_custom * p, void* m, u16_t n),             \
    (l, len, t, p, m, n))                                                                         \
  X(void, pbuf_cat, (struct pbuf * h, struct pbuf * t), (h, t))                                   \
  X(u16_t, pbuf_copy_partial, (const struct pbuf* p, void* d, u16_t len, u16_t off),              \
    (p, d, len, off))                                                                             \
  X(u8_t, pbuf_free, (struct pbuf * p), (p))                                                      \
  X(struct pbuf*, pbuf_free_header, (struct pbuf * q, u16_t size), (q, size))                     \
  X(err_t, pbuf_take, (struct pbuf * b, const void* d, u16_t len), (b, d, len))                   \
  X(void, sys_check_timeouts, (void), ())                                                         \
  X(u32_t, sys_timeouts_sleeptime, (void), ())                                                    \
  X(void, tcp_abandon, (struct tcp_pcb * p, int reset), (p, reset))                               \
  X(void, tcp_abort, (struct tcp_pcb * p), (p))                                                   \
  X(void, tcp_accept, (struct tcp_pcb * p, tcp_accept_fn f), (p, f))                              \
  X(void, tcp_arg, (struct tcp_pcb * p, void* a), (p, a))                                         \
  X(err_t, tcp_bind, (struct tcp_pcb * p, const ip_addr_t* a, u16_t port), (p, a, port))          \
  X(err_t, tcp_close, (struct tcp_pcb * p), (p))                                                  \
  X(err_t, tcp_connect, (struct tcp_pcb * p, const ip_addr_t* a, u16_t port, tcp_connected_fn f), \
    (p, a, port, f))                                                                              \
  X(void, tcp_err, (struct tcp_pcb * p, tcp_err_fn f), (p, f))                                    \
  X(struct tcp_pcb*, tcp_listen_with_backlog_and_err, (struct tcp_pcb * p, u8_t b, err_t * e),    \
    (p, b, e))                                                                                    \
  X(struct tcp_pcb*, tcp_new_ip_type, (u8_t t), (t))                                              \
  X(err_t, tcp_output, (struct tcp_pcb * p), (p))                                                 \
  X(void, tcp_recv, (struct tcp_pcb * p, tcp_recv_fn f), (p, f))                                  \
  X(void, tcp_recved, (struct tcp_pcb * p, u16_t len), (p, len))                                  \
  X(void, tcp_sent, (struct tcp_pcb * p, tcp_sent_fn f), (p, f))                                  \
  X(u32_t, tcp_update_rcv_ann_wnd, (struct tcp_pcb * p), (p))                                     \
  X(err_t, tcp_shutdown, (struct tcp_pcb * p, int rx, int tx), (p, rx, tx))                       \
  X(err_t, tcp_write, (struct tcp_pcb * p, const void* d, u16_t len, u8_t flags),                 \
    (p, d, len, flags))

namespace {

struct Functions {
#define SOFTRDMA_LWIP_POINTER(ret, name, params, args) ret(*name) params = nullptr;
  SOFTRDMA_LWIP_FUNCTIONS(SOFTRDMA_LWIP_POINTER)
#undef SOFTRDMA_LWIP_POINTER
};
Functions g_lwip;
tcp_pcb** g_active_pcbs = nullptr;  // the library's tcp_active_pcbs
u32_t* g_tcp_ticks = nullptr;       // the library's tcp_ticks

}  // namespace

// The forwarders, under lwIP's own names (C linkage, as its headers declare them).
extern "C" {
#define SOFTRDMA_LWIP_FORWARDER(ret, name, params, args) \
  ret name params {                                      \
    return g_lwip.name args;                             \
  }
SOFTRDMA_LWIP_FUNCTIONS(SOFTRDMA_LWIP_FORWARDER)
#undef SOFTRDMA_LWIP_FORWARDER
}

// A received segment lwtcp checked before lwIP (note_checked_segment), whose sum lwIP's check of
// it is answered with instead of a second pass over its bytes.
namespace {
struct CheckedSegment {
  const void* at = nullptr;
  int len = 0;
  u16_t sum = 0;  // the segment's sum as the check needs it: the pseudo-header's complement
};
thread_local CheckedSegment t_checked;
}  // namespace

// lwIP sums every segment it sends (as it copies it in) and every one it receives with
// lwip_standard_chksum, which Debian's build leaves at lwIP's 16-bit loop (no LWIP_CHKSUM of
// its own). lwIP calls it through its PLT, so this definition, which libibverbs.so.1 exports
// (libibverbs.map), takes its place in every program linked with libibverbs: the same sum,
// eight bytes at a time (or the noted one). Where it is not exported (the softrdma tool),
// lwIP's own runs.
extern "C" u16_t lwip_standard_chksum(const void* dataptr, int len) {
  if (dataptr == t_checked.at && len == t_checked.len) {
    t_checked.at = nullptr;
    return t_checked.sum;
  }
  return len > 0 ? softrdma::wire::ones_sum_host(dataptr, static_cast<std::size_t>(len)) : 0;
}

namespace softrdma::lwtcp {

void note_checked_segment(const void* segment, int len, std::uint16_t pseudo_sum) {
  // lwIP adds the pseudo-header to this sum and expects all ones: its complement does that.
  t_checked = {segment, len, static_cast<u16_t>(~pseudo_sum)};
}

void forget_checked_segment() {
  t_checked.at = nullptr;
}

bool load_lwip(std::string& error) {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    const std::string prefix =
        std::string("softiwarp0's userspace TCP needs ") + kLwipLibrary + " (Debian's liblwip0): ";
    void* lib = dlopen(kLwipLibrary, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* why = dlerror();
      failure = prefix + (why ? why : "dlopen failed");
      return;
    }
    Functions f;
    bool missing = false;
#define SOFTRDMA_LWIP_LOOKUP(ret, name, params, args)                    \
  if (!missing) {                                                        \
    f.name = reinterpret_cast<ret(*) params>(dlsym(lib, #name));         \
    if (!f.name) {                                                       \
      failure = prefix + "the library has no " #name " (not lwIP 2.1?)"; \
      missing = true;                                                    \
    }                                                                    \
  }
    SOFTRDMA_LWIP_FUNCTIONS(SOFTRDMA_LWIP_LOOKUP)
#undef SOFTRDMA_LWIP_LOOKUP
    auto** active = missing ? nullptr : static_cast<tcp_pcb**>(dlsym(lib, "tcp_active_pcbs"));
    if (!missing && !active) {
      failure = prefix + "the library has no tcp_active_pcbs (not lwIP 2.1?)";
      missing = true;
    }
    auto* ticks = missing ? nullptr : static_cast<u32_t*>(dlsym(lib, "tcp_ticks"));
    if (!missing && !ticks) {
      failure = prefix + "the library has no tcp_ticks (not lwIP 2.1?)";
      missing = true;
    }
    if (missing) {
      dlclose(lib);
      return;
    }
    g_lwip = f;  // kept loaded for the process's life
    g_active_pcbs = active;
    g_tcp_ticks = ticks;
  });
  error = failure;
  return failure.empty();
}

tcp_pcb* lwip_active_pcbs() {
  return g_active_pcbs ? *g_active_pcbs : nullptr;
}

void lwip_init_unpredictably() {
  std::uint32_t seed[2];
  if (getrandom(seed, sizeof seed, 0) != static_cast<ssize_t>(sizeof seed)) {
    const auto t =
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    seed[0] = static_cast<std::uint32_t>(t ^ (t >> 32)) ^ static_cast<std::uint32_t>(getpid());
    seed[1] = seed[0] * 2654435761u;
  }
  // glibc's rand() draws from random()'s state: lwIP's draws come from a state of our own, and
  // the program's sequence resumes untouched.
  static char state[64];
  char* program = initstate(seed[0], state, sizeof state);
  g_lwip.lwip_init();
  setstate(program);
  if (g_tcp_ticks) *g_tcp_ticks = seed[1];  // lwIP compares ticks only as differences
}

}  // namespace softrdma::lwtcp
