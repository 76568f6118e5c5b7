#include "netdev/gso_run.h"

namespace softrdma::netdev {

std::size_t gso_run_end(std::span<Packet* const> pkts, std::size_t i, std::size_t max_segments,
                        std::size_t max_bytes) {
  const Packet& p = *pkts[i];
  std::size_t j = i + 1, bytes = p.len;
  while (j < pkts.size() && j - i < max_segments && pkts[j - 1]->len == p.len &&
         pkts[j]->len <= p.len && bytes + pkts[j]->len <= max_bytes && pkts[j]->dst == p.dst &&
         pkts[j]->dst_port == p.dst_port && pkts[j]->src_port == p.src_port &&
         pkts[j]->traffic_class == p.traffic_class && pkts[j]->hop_limit == p.hop_limit) {
    bytes += pkts[j]->len;
    ++j;
  }
  return j;
}

}  // namespace softrdma::netdev
