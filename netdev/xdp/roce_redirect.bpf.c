// The XDP program of the AF_XDP backend: IPv4 UDP datagrams to our address and port 4791 (not
// fragments, no IP options) in our VLAN (tagged with its ID, or untagged when we have none) go to
// the AF_XDP socket of the receiving queue; every other frame (ARP, other traffic, RoCEv2 for other
// addresses) passes to the kernel. Built with clang -target bpf at build time and embedded in the
// library.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
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

// Key 0: our IPv4 address, in network byte order; key 1: the RoCEv2 UDP port, network order;
// key 2: our VLAN ID, 0 for none.
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 3);
  __type(key, __u32);
  __type(value, __u32);
} roce_config SEC(".maps");

struct vlan_tag {
  __be16 tci;
  __be16 proto;
};

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
  __u32 key = 2;
  __u32* our_vid = bpf_map_lookup_elem(&roce_config, &key);
  if (!our_vid || vid != *our_vid) return XDP_PASS;
  if (proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
  struct iphdr* ip = l3;
  if ((void*)(ip + 1) > end) return XDP_PASS;
  if (ip->ihl != 5 || ip->protocol != IPPROTO_UDP || (ip->frag_off & bpf_htons(0x3FFF))) {
    return XDP_PASS;
  }
  key = 0;
  __u32* addr = bpf_map_lookup_elem(&roce_config, &key);
  if (!addr || ip->daddr != *addr) return XDP_PASS;
  struct udphdr* udp = (void*)(ip + 1);
  if ((void*)(udp + 1) > end) return XDP_PASS;
  key = 1;
  __u32* port = bpf_map_lookup_elem(&roce_config, &key);
  if (!port || udp->dest != (__be16)*port) return XDP_PASS;
  // No socket on this queue: pass it on.
  return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "GPL";
