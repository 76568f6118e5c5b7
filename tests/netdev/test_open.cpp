// netdev::open and open_frame_port: which backend a spec names, and the messages for specs that
// do not parse.
#include <gtest/gtest.h>

#include "helpers.h"
#include "netdev/memory.h"
#include "netdev/open.h"

namespace softrdma::netdev {
namespace {

using namespace test;  // helpers.h

OpenOptions with_origin() {
  OpenOptions o;
  o.spec_origin = "SOFTRDMA_NETDEV: ";
  return o;
}

TEST(Open, SpecsThatDoNotParse) {
  std::string error;
  EXPECT_EQ(open("tcp:1.2.3.4", with_origin(), error), nullptr);
  EXPECT_EQ(error, std::string("SOFTRDMA_NETDEV: unsupported backend 'tcp:1.2.3.4' (expected ") +
                       kSpecForms + ")");
  EXPECT_EQ(open("udp:nowhere", with_origin(), error), nullptr);
  EXPECT_EQ(error, "SOFTRDMA_NETDEV: bad address in 'udp:nowhere'");
  EXPECT_EQ(open("af_packet:", with_origin(), error), nullptr);
  EXPECT_EQ(error, "SOFTRDMA_NETDEV: bad value 'af_packet:'");
  EXPECT_EQ(open("af_xdp:lo:", with_origin(), error), nullptr);
  EXPECT_EQ(error, "SOFTRDMA_NETDEV: bad value 'af_xdp:lo:'");
  EXPECT_EQ(open("dpdk:net_tap0@", with_origin(), error), nullptr);
  EXPECT_EQ(error, "SOFTRDMA_NETDEV: bad value 'dpdk:net_tap0@'");
}

TEST(Open, SplitsInterfaceAndDeviceSpecs) {
  std::string a, b;
  ASSERT_TRUE(split_iface_spec("af_xdp:veth0:10.0.0.1", a, b));
  EXPECT_EQ(a, "veth0");
  EXPECT_EQ(b, "10.0.0.1");
  ASSERT_TRUE(split_iface_spec("af_packet:veth0", a, b));
  EXPECT_EQ(b, "");
  ASSERT_TRUE(split_dpdk_spec("dpdk:net_af_packet0,iface=veth0@fe80::1", a, b));
  EXPECT_EQ(a, "net_af_packet0,iface=veth0");
  EXPECT_EQ(b, "fe80::1");
  EXPECT_FALSE(split_dpdk_spec("dpdk:", a, b));
}

TEST(Open, FramePortsComeFromRawBackendSpecsOnly) {
  EXPECT_EQ(frame_backend("af_packet:veth0:10.0.0.1"), FrameBackend::kAfPacket);
  EXPECT_EQ(frame_backend("af_xdp:veth0"), FrameBackend::kAfXdp);
  EXPECT_EQ(frame_backend("dpdk:net_af_packet0,iface=veth0@10.0.0.1"), FrameBackend::kDpdk);
  EXPECT_EQ(frame_backend("udp:10.0.0.1"), FrameBackend::kNone);
  EXPECT_EQ(frame_backend(""), FrameBackend::kNone);
  // A dpdk vdev's interface carries the other backends; a PCI NIC has none.
  EXPECT_EQ(with_frame_backend("dpdk:net_af_packet0,iface=veth0@10.0.0.1", FrameBackend::kAfPacket),
            "af_packet:veth0:10.0.0.1");
  EXPECT_EQ(with_frame_backend("dpdk:net_tap0,iface=tap0,persist", FrameBackend::kAfXdp),
            "af_xdp:tap0");
  EXPECT_EQ(with_frame_backend("dpdk:0000:03:00.0@10.0.0.1", FrameBackend::kAfPacket),
            "dpdk:0000:03:00.0@10.0.0.1");
  EXPECT_EQ(with_frame_backend("af_packet:veth0", FrameBackend::kDpdk), "af_packet:veth0");
  EXPECT_EQ(dpdk_vdev_iface("net_af_packet0,qpairs=1,iface=veth0,blocksz=4096"), "veth0");
  EXPECT_EQ(dpdk_vdev_iface("net_null0"), "");
  EXPECT_EQ(with_frame_backend("af_xdp:veth0:10.0.0.1", FrameBackend::kAfPacket),
            "af_packet:veth0:10.0.0.1");
  EXPECT_EQ(with_frame_backend("af_packet:veth0", FrameBackend::kAfXdp), "af_xdp:veth0");
  EXPECT_EQ(with_frame_backend("udp:10.0.0.1", FrameBackend::kAfPacket), "udp:10.0.0.1");
  std::string error;
  EXPECT_EQ(open_frame_port("udp:10.0.0.1", ip("10.0.0.1"), Steering::kTcp, with_origin(), error),
            nullptr);
  EXPECT_EQ(error,
            "SOFTRDMA_NETDEV: unsupported backend 'udp:10.0.0.1' (expected "
            "af_packet:INTERFACE[:ADDRESS], af_xdp:INTERFACE[:ADDRESS] or dpdk:DEVICE@ADDRESS)");
  EXPECT_EQ(open_frame_port("af_packet:", ip("10.0.0.1"), Steering::kTcp, with_origin(), error),
            nullptr);
  EXPECT_EQ(error, "SOFTRDMA_NETDEV: bad value 'af_packet:'");
  EXPECT_EQ(open_frame_port("dpdk:", ip("10.0.0.1"), Steering::kTcp, with_origin(), error),
            nullptr);
  EXPECT_EQ(error, "SOFTRDMA_NETDEV: bad value 'dpdk:'");
}

TEST(Open, MemoryNeedsAFabricAndAFreeAddress) {
  std::string error;
  IpAddr addr;
  EXPECT_EQ(open("memory:10.0.0.1", {}, error), nullptr);
  OpenOptions o;
  o.fabric = std::make_shared<MemoryFabric>();
  auto nd = open("memory:10.0.0.1", o, error, &addr);
  ASSERT_NE(nd, nullptr) << error;
  EXPECT_EQ(nd->backend(), "mem");
  EXPECT_EQ(addr, ip("10.0.0.1"));
  EXPECT_EQ(nd->placement(), nullptr);
  EXPECT_EQ(open("memory:10.0.0.1", o, error), nullptr);  // taken
  EXPECT_FALSE(error.empty());
}

TEST(Open, NoSpecIsUdpOnALoopbackAddressOfItsOwn) {
  std::string error;
  IpAddr addr;
  auto nd = open("", {}, error, &addr);
  ASSERT_NE(nd, nullptr) << error;
  EXPECT_EQ(nd->backend(), "udp");
  ASSERT_TRUE(addr.is_v4());
  EXPECT_EQ(addr.v4_host() >> 16, 0x7F01u);
  EXPECT_EQ(nd->addresses()[0], addr);
  EXPECT_NE(nd->placement(), nullptr);  // host-local rings by default
  OpenOptions kernel_only;
  kernel_only.host_local_rings = false;
  auto other = open("", kernel_only, error, &addr);
  ASSERT_NE(other, nullptr) << error;
  EXPECT_EQ(other->placement(), nullptr);
}

}  // namespace
}  // namespace softrdma::netdev
