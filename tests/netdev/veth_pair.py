"""Two network namespaces joined by a veth pair, for the netdev tests that stand for two hosts:
PREFIX-a holds veth0 with 10.97.SUBNET.1/24 and fd97:SUBNET::1/64, PREFIX-b veth1 with the .2
and ::2 addresses (only inside them). delete() removes both namespaces, and the veth with them."""
import subprocess


def sh(*args):
    subprocess.run(list(args), check=True, capture_output=True, text=True)


class VethPair:
    def __init__(self, prefix, subnet):
        self.ns = {"a": prefix + "-a", "b": prefix + "-b"}
        self.iface = {"a": "veth0", "b": "veth1"}
        self.addr = {"a": f"10.97.{subnet}.1", "b": f"10.97.{subnet}.2"}
        self.addr6 = {"a": f"fd97:{subnet}::1", "b": f"fd97:{subnet}::2"}

    def up(self):
        sh("ip", "netns", "add", self.ns["a"])
        sh("ip", "netns", "add", self.ns["b"])
        sh("ip", "link", "add", self.iface["a"], "netns", self.ns["a"], "type", "veth", "peer", "name",
           self.iface["b"], "netns", self.ns["b"])
        for side in ("a", "b"):
            ns, dev = self.ns[side], self.iface[side]
            sh("ip", "-n", ns, "addr", "add", self.addr[side] + "/24", "dev", dev)
            sh("ip", "-n", ns, "addr", "add", self.addr6[side] + "/64", "dev", dev, "nodad")
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")

    def gso_max_segs(self, n):
        """1: the kernel cuts UDP GSO messages before the veth, as a NIC would on a wire (also
        gso_max_size 512: a packet socket's GSO frames carry no segment count, and every GSO
        frame softrdma sends is longer); 65535: both limits back to the veth's own."""
        size = "512" if n == 1 else "65536"
        for side in ("a", "b"):
            sh("ip", "-n", self.ns[side], "link", "set", "dev", self.iface[side], "gso_max_segs", str(n),
               "gso_max_size", size)

    def delete(self):
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
