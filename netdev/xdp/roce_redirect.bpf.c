// The XDP program of the AF_XDP backend: UDP datagrams to our address (IPv4: not fragments, no IP
// options; IPv6: no extension headers) and port 4791, in our VLAN (tagged with its ID, or untagged
// when we have none), go to the AF_XDP socket of the receiving queue; every other frame (ARP,
// neighbour discovery, other traffic, RoCEv2 for other addresses) passes to the kernel. With
// `tcp` set (a userspace TCP above the socket, on an address no interface holds) it takes TCP to
// our address instead (fragments and options too: the stack reassembles) and ARP whose target is
// our address (IPv4) or neighbour discovery for it (IPv6), and the kernel sees none of them;
// with `tcp` 2 (an address the kernel holds too) only TCP to the ports marked in tcp_ports.
// Built with clang -target bpf at build time and embedded in the library.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

// After the kernel's headers, which declare what the helpers use.
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, 64);
  __type(key, __u32);
  __type(value, __u32);
} xsks_map SEC(".maps");

// What is ours (AfXdpNetdev fills entry 0; addresses and port in network byte order).
struct roce_config {
  __u32 ipv6;      // 1: addr6 is our address, else addr4
  __u32 addr4;
  __u8 addr6[16];
  __u32 port;      // the RoCEv2 UDP port, in its low 16 bits
  __u32 vid;       // our VLAN ID, 0 for none
  __u32 tcp;       // 1: TCP and ARP / neighbour discovery for our address, not RoCEv2;
                   // 2: TCP to our address and a port marked in tcp_ports only
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct roce_config);
} roce_config SEC(".maps");

// With tcp 2 (an address the kernel holds too): the TCP ports whose segments are the userspace
// TCP's (value 1), set by AfXdpNetdev::steer_tcp_port; the rest of the address stays the kernel's.
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 65536);
  __type(key, __u32);
  __type(value, __u32);
} tcp_ports SEC(".maps");

struct vlan_tag {
  __be16 tci;
  __be16 proto;
};

// An ARP packet for IPv4 over Ethernet, up to the target protocol address.
struct arp_ipv4 {
  __be16 htype, ptype;
  __u8 hlen, plen;
  __be16 op;
  __u8 sha[6];
  __u8 spa[4];
  __u8 tha[6];
  __u8 tpa[4];
};

// The userspace TCP's frames (cfg->tcp) for our IPv6 address: TCP, fragments and ICMPv6
// (neighbour discovery) to it, and ICMPv6 to its solicited-node group (ff02::1:ffXX:XXXX).
static __always_inline int tcp6_frame_is_ours(void* l3, void* end,
                                              const struct roce_config* cfg) {
  struct ipv6hdr* ip6 = l3;
  if ((void*)(ip6 + 1) > end) return 0;
  const __u8* dst = ip6->daddr.in6_u.u6_addr8;
  int ours = 1;
  for (int i = 0; i < 16; ++i) {
    if (dst[i] != cfg->addr6[i]) ours = 0;
  }
  if (ours) {
    return ip6->nexthdr == IPPROTO_TCP || ip6->nexthdr == 44 /* fragment */ ||
           ip6->nexthdr == 58 /* ICMPv6 */;
  }
  if (dst[0] != 0xFF || dst[1] != 2 || dst[11] != 1 || dst[12] != 0xFF) return 0;
  for (int i = 2; i < 11; ++i) {
    if (dst[i] != 0) return 0;
  }
  for (int i = 13; i < 16; ++i) {
    if (dst[i] != cfg->addr6[i]) return 0;
  }
  return ip6->nexthdr == 58;
}

// With tcp 2: TCP to our address (IPv4 without options, or IPv6 with TCP next) whose
// destination port is marked in tcp_ports.
static __always_inline int held_port_is_ours(__be16 proto, void* l3, void* end,
                                             const struct roce_config* cfg) {
  struct tcphdr_ports {
    __be16 source, dest;
  }* tcp;
  if (cfg->ipv6) {
    struct ipv6hdr* ip6 = l3;
    if (proto != bpf_htons(ETH_P_IPV6) || (void*)(ip6 + 1) > end) return 0;
    if (ip6->nexthdr != IPPROTO_TCP) return 0;
    for (int i = 0; i < 16; ++i) {
      if (ip6->daddr.in6_u.u6_addr8[i] != cfg->addr6[i]) return 0;
    }
    tcp = (void*)(ip6 + 1);
  } else {
    struct iphdr* ip = l3;
    if (proto != bpf_htons(ETH_P_IP) || (void*)(ip + 1) > end) return 0;
    if (ip->ihl != 5 || ip->protocol != IPPROTO_TCP || ip->daddr != cfg->addr4) return 0;
    if (ip->frag_off & bpf_htons(0x3FFF)) return 0;  // a fragment: the kernel's
    tcp = (void*)(ip + 1);
  }
  if ((void*)(tcp + 1) > end) return 0;
  __u32 port = bpf_ntohs(tcp->dest);
  __u32* marked = bpf_map_lookup_elem(&tcp_ports, &port);
  return marked && *marked;
}

// The userspace TCP's frames (cfg->tcp): TCP or ARP for our IPv4 address, or as above for IPv6.
static __always_inline int tcp_frame_is_ours(__be16 proto, void* l3, void* end,
                                             const struct roce_config* cfg) {
  if (cfg->tcp == 2) return held_port_is_ours(proto, l3, end, cfg);
  if (cfg->ipv6) return proto == bpf_htons(ETH_P_IPV6) && tcp6_frame_is_ours(l3, end, cfg);
  if (proto == bpf_htons(ETH_P_ARP)) {
    struct arp_ipv4* arp = l3;
    if ((void*)(arp + 1) > end) return 0;
    if (arp->ptype != bpf_htons(ETH_P_IP) || arp->plen != 4) return 0;
    const __u8* ours = (const __u8*)&cfg->addr4;
    for (int i = 0; i < 4; ++i) {
      if (arp->tpa[i] != ours[i]) return 0;
    }
    return 1;
  }
  if (proto != bpf_htons(ETH_P_IP)) return 0;
  struct iphdr* ip = l3;
  if ((void*)(ip + 1) > end) return 0;
  return ip->protocol == IPPROTO_TCP && ip->daddr == cfg->addr4;
}

SEC("xdp")
int softrdma_roce_redirect(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;
  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > end) return XDP_PASS;
  __be16 proto = eth->h_proto;
  void* l3 = eth + 1;
  __u32 vid = 0;
  if (proto == bpf_htons(ETH_P_8021Q)) {
    struct vlan_tag* tag = l3;
    if ((void*)(tag + 1) > end) return XDP_PASS;
    vid = bpf_ntohs(tag->tci) & 0xFFF;
    proto = tag->proto;
    l3 = tag + 1;
  }
  __u32 key = 0;
  struct roce_config* cfg = bpf_map_lookup_elem(&roce_config, &key);
  if (!cfg || vid != cfg->vid) return XDP_PASS;
  if (cfg->tcp) {
    if (!tcp_frame_is_ours(proto, l3, end, cfg)) return XDP_PASS;
    return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
  }
  struct udphdr* udp;
  if (proto == bpf_htons(ETH_P_IP) && !cfg->ipv6) {
    struct iphdr* ip = l3;
    if ((void*)(ip + 1) > end) return XDP_PASS;
    if (ip->ihl != 5 || ip->protocol != IPPROTO_UDP || (ip->frag_off & bpf_htons(0x3FFF)) ||
        ip->daddr != cfg->addr4) {
      return XDP_PASS;
    }
    udp = (void*)(ip + 1);
  } else if (proto == bpf_htons(ETH_P_IPV6) && cfg->ipv6) {
    struct ipv6hdr* ip6 = l3;
    if ((void*)(ip6 + 1) > end) return XDP_PASS;
    if (ip6->nexthdr != IPPROTO_UDP) return XDP_PASS;
    for (int i = 0; i < 16; ++i) {
      if (ip6->daddr.in6_u.u6_addr8[i] != cfg->addr6[i]) return XDP_PASS;
    }
    udp = (void*)(ip6 + 1);
  } else {
    return XDP_PASS;
  }
  if ((void*)(udp + 1) > end || udp->dest != (__be16)cfg->port) return XDP_PASS;
  // No socket on this queue: pass it on.
  return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "GPL";
