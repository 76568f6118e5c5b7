// The pcapng writer and reader: round trips through libpcap (pcap::Reader), our reader and
// tshark; annotations; per-process names; rotation; `softrdma trace merge`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "helpers.h"
#include "pcap/pcapng_reader.h"
#include "pcap/pcapng_writer.h"
#include "pcap/reader.h"
#include "pcap/writer.h"

using namespace softrdma;
using namespace softrdma::trace_test;

namespace {

std::vector<std::uint8_t> frame_of(std::size_t len, std::uint8_t seed) {
  std::vector<std::uint8_t> f(len);
  for (std::size_t i = 0; i < len; ++i) f[i] = static_cast<std::uint8_t>(seed * 17 + i);
  return f;
}

std::string annotation(const pcap::Annotation& a) {
  char buf[256];
  return std::string(buf, pcap::format_annotation(a, buf, sizeof buf));
}

}  // namespace

TEST(Annotation, ExactFormat) {
  pcap::Annotation a;
  a.tx = true;
  a.dev = "softroce0";
  a.qp = 0x11;
  a.fault = "drop";
  EXPECT_EQ(annotation(a), "softrdma: dir=tx dev=softroce0 qp=0x000011 fault=drop");
  pcap::Annotation b;
  b.tx = false;
  b.dev = "softroce1";
  b.qp = 0xABCDEF;
  b.drop = "icrc";
  b.retrans = true;
  EXPECT_EQ(annotation(b), "softrdma: dir=rx dev=softroce1 qp=0xabcdef drop=icrc retrans=1");
  pcap::Annotation c;
  c.tx = false;
  EXPECT_EQ(annotation(c), "softrdma: dir=rx");
  char tiny[12];
  EXPECT_EQ(pcap::format_annotation(a, tiny, sizeof tiny), sizeof tiny);
}

TEST(PcapngWriter, InsertBeforeExtension) {
  EXPECT_EQ(pcap::insert_before_extension("a/rc.pcapng", "7"), "a/rc.7.pcapng");
  EXPECT_EQ(pcap::insert_before_extension("a.b/rc", "7"), "a.b/rc.7");
  EXPECT_EQ(pcap::insert_before_extension(".hidden", "7"), ".hidden.7");
  EXPECT_EQ(pcap::insert_before_extension("x.tar.pcapng", "1"), "x.tar.1.pcapng");
}

TEST(PcapngWriter, ReadBackByLibpcapAndOurReader) {
  TempDir dir;
  const std::string path = dir / "w.pcapng";
  std::string error;
  auto w = pcap::PcapngWriter::open(path, error);
  ASSERT_TRUE(w) << error;
  EXPECT_EQ(w->path(), path);
  const std::uint32_t if0 = w->add_interface("softroce0", 1, 0);
  const std::uint32_t if1 = w->add_interface("softroce1", 1, 0);
  const std::int64_t t0 = 1'700'000'000'123'456'789;
  for (int i = 0; i < 5; ++i) {
    const auto f = frame_of(60 + static_cast<std::size_t>(i) * 3, static_cast<std::uint8_t>(i));
    ASSERT_TRUE(w->write(i % 2 ? if1 : if0, t0 + i * 1001, wire::Bytes(f),
                         static_cast<std::uint32_t>(f.size()),
                         i % 2 ? pcap::kEpbInbound : pcap::kEpbOutbound,
                         i == 4 ? "" : "softrdma: dir=tx dev=softroce0"));
  }
  w->flush();

  auto r = pcap::Reader::open(path, error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->linktype(), 1);
  pcap::Frame f;
  int n = 0;
  while (r->next(f) == 1) {
    const auto want = frame_of(60 + static_cast<std::size_t>(n) * 3, static_cast<std::uint8_t>(n));
    EXPECT_EQ(std::vector<std::uint8_t>(f.data.begin(), f.data.end()), want);
    EXPECT_EQ(f.len, want.size());
    const std::int64_t ts = t0 + n * 1001;
    EXPECT_EQ(f.ts_sec, ts / 1'000'000'000);
    EXPECT_EQ(f.ts_nsec, ts % 1'000'000'000);
    ++n;
  }
  EXPECT_EQ(n, 5);

  const Trace t = read_trace(path);
  ASSERT_EQ(t.ifaces.size(), 2u);
  EXPECT_EQ(t.ifaces[0].name, "softroce0");
  EXPECT_EQ(t.ifaces[1].name, "softroce1");
  EXPECT_EQ(t.ifaces[0].linktype, 1);
  ASSERT_EQ(t.recs.size(), 5u);
  EXPECT_EQ(t.recs[1].iface, 1u);
  EXPECT_EQ(t.recs[1].flags, pcap::kEpbInbound);
  EXPECT_EQ(t.recs[0].flags, pcap::kEpbOutbound);
  EXPECT_EQ(t.recs[0].comment, "softrdma: dir=tx dev=softroce0");
  EXPECT_EQ(t.recs[4].comment, "");
  EXPECT_EQ(t.recs[3].ts_ns, t0 + 3 * 1001);
  EXPECT_EQ(w->packets(), 5u);
}

TEST(PcapngWriter, TsharkShowsCommentsFlagsAndInterfaces) {
  const std::string ts = tshark();
  if (ts.empty()) GTEST_SKIP() << "tshark not found (TSHARK unset and not on PATH)";
  TempDir dir;
  const std::string path = dir / "t.pcapng";
  std::string error;
  {
    auto w = pcap::PcapngWriter::open(path, error);
    ASSERT_TRUE(w) << error;
    const std::uint32_t i = w->add_interface("softroce0", 1, 0);
    const auto f = frame_of(100, 1);
    w->write(i, pcap::PcapngWriter::now_ns(), wire::Bytes(f), 100, pcap::kEpbOutbound,
             "softrdma: dir=tx dev=softroce0 qp=0x000011 fault=drop");
    w->write(i, pcap::PcapngWriter::now_ns(), wire::Bytes(f).first(40), 100, pcap::kEpbInbound,
             "softrdma: dir=rx dev=softroce0 qp=0x000012");
  }  // destruction flushes
  CmdResult r = run("'" + ts + "' -r '" + path + "' -T fields -e frame.comment -e frame.len");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "softrdma: dir=tx dev=softroce0 qp=0x000011 fault=drop\t100")) << r.out;
  EXPECT_TRUE(has(r.out, "softrdma: dir=rx dev=softroce0 qp=0x000012\t100")) << r.out;
  r = run("'" + ts + "' -r '" + path + "' -V");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "Interface name: softroce0")) << r.out;
  EXPECT_TRUE(has(r.out, "Direction: Outbound")) << r.out;
  EXPECT_TRUE(has(r.out, "Direction: Inbound")) << r.out;
  EXPECT_TRUE(has(r.out, "nanoseconds") || has(r.out, "Arrival Time")) << r.out;
  EXPECT_TRUE(has(r.out, "40 bytes captured")) << r.out;
}

// The section header names the writer and its version (shb_userappl "softrdma VERSION", the
// project's), as Wireshark's capinfos reads it; a rotated file's section header too.
TEST(PcapngWriter, SectionHeaderNamesSoftrdmaAndItsVersion) {
  const std::string ts = tshark();
  if (ts.empty()) GTEST_SKIP() << "tshark not found (TSHARK unset and not on PATH)";
  const std::string capinfos = (std::filesystem::path(ts).parent_path() / "capinfos").string();
  if (access(capinfos.c_str(), X_OK) != 0) GTEST_SKIP() << "no capinfos beside " << ts;
  TempDir dir;
  std::string error;
  pcap::PcapngOptions opts;
  opts.rotate_bytes = 400;
  std::vector<std::string> files;
  {
    auto w = pcap::PcapngWriter::open(dir / "v.pcapng", error, opts);
    ASSERT_TRUE(w) << error;
    const std::uint32_t i = w->add_interface("softroce0", 1, 0);
    const auto f = frame_of(200, 2);
    for (int k = 0; k < 3; ++k)
      w->write(i, pcap::PcapngWriter::now_ns(), wire::Bytes(f), 200, 0, "");
    files = w->files();
  }
  ASSERT_GE(files.size(), 2u);
  for (const std::string& file : {files.front(), files.back()}) {
    const CmdResult r = run("'" + capinfos + "' '" + file + "'");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(has(r.out, "Capture application: softrdma " SOFTRDMA_VERSION "\n")) << r.out;
  }
}

TEST(PcapngWriter, PidPatternAndSecondWriterOfAPathGetsItsOwnFile) {
  TempDir dir;
  std::string error;
  auto a = pcap::PcapngWriter::open(dir / "p-%p.pcapng", error);
  ASSERT_TRUE(a) << error;
  EXPECT_EQ(a->path(), dir / ("p-" + std::to_string(getpid()) + ".pcapng"));
  // Another writer of the same file (as another process would be) must not clobber it.
  auto b = pcap::PcapngWriter::open(dir / "same.pcapng", error);
  auto c = pcap::PcapngWriter::open(dir / "same.pcapng", error);
  ASSERT_TRUE(b && c) << error;
  EXPECT_EQ(b->path(), dir / "same.pcapng");
  EXPECT_EQ(c->path(), dir / ("same." + std::to_string(getpid()) + ".pcapng"));
}

TEST(PcapngWriter, RotatesBySize) {
  TempDir dir;
  std::string error;
  pcap::PcapngOptions opts;
  opts.rotate_bytes = 4096;
  auto w = pcap::PcapngWriter::open(dir / "r.pcapng", error, opts);
  ASSERT_TRUE(w) << error;
  const std::uint32_t i = w->add_interface("softroce0", 1, 0);
  const auto f = frame_of(200, 3);
  for (int k = 0; k < 100; ++k) {
    w->write(i, 1'000'000'000LL * k, wire::Bytes(f), 200, pcap::kEpbOutbound, "softrdma: dir=tx");
  }
  w->flush();
  const auto files = w->files();
  ASSERT_GT(files.size(), 3u);
  EXPECT_EQ(files[1], dir / "r.1.pcapng");
  EXPECT_EQ(files[2], dir / "r.2.pcapng");
  int total = 0;
  for (const std::string& name : files) {
    EXPECT_LE(std::filesystem::file_size(name), 4096u) << name;
    auto r = pcap::Reader::open(name, error);
    ASSERT_TRUE(r) << name << ": " << error;
    pcap::Frame fr;
    int n = 0;
    while (r->next(fr) == 1) ++n;
    EXPECT_GT(n, 0) << name;
    total += n;
    EXPECT_EQ(read_trace(name).ifaces.size(), 1u) << "each file repeats the IDBs";
  }
  EXPECT_EQ(total, 100);
}

TEST(PcapngWriter, FlushAllWritesBufferedPackets) {
  TempDir dir;
  std::string error;
  auto w = pcap::PcapngWriter::open(dir / "f.pcapng", error);
  ASSERT_TRUE(w) << error;
  const std::uint32_t i = w->add_interface("softroce0", 1, 0);
  const auto f = frame_of(80, 2);
  w->write(i, pcap::PcapngWriter::now_ns(), wire::Bytes(f), 80, 0, "");
  pcap::PcapngWriter::flush_all();  // what the atexit handler does
  EXPECT_EQ(read_trace(dir / "f.pcapng").recs.size(), 1u);
}

TEST(TraceMerge, TimeOrderedWithBothInterfacesAndAnnotations) {
  TempDir dir;
  std::string error;
  for (int file = 0; file < 2; ++file) {
    pcap::PcapngOptions opts;
    opts.per_process_name = false;
    auto w = pcap::PcapngWriter::open(dir / ("in" + std::to_string(file) + ".pcapng"), error, opts);
    ASSERT_TRUE(w) << error;
    // Different snaplens in the inputs: the merged file must still be one libpcap can read.
    const std::uint32_t i = w->add_interface("dev" + std::to_string(file), 1, file ? 64 : 0);
    for (int k = 0; k < 10; ++k) {
      const auto f = frame_of(64, static_cast<std::uint8_t>(file * 10 + k));
      const std::string c =
          "softrdma: dir=tx dev=dev" + std::to_string(file) + " qp=0x00000" + std::to_string(k);
      w->write(i, 1'000'000'000LL + k * 100 + file * 50, wire::Bytes(f), 64, pcap::kEpbOutbound, c);
    }
  }
  // A classic pcap input too.
  {
    auto w = pcap::Writer::open(dir / "classic.pcap", 1, error);
    ASSERT_TRUE(w) << error;
    const auto f = frame_of(64, 99);
    w->write(1, 75, wire::Bytes(f));
  }
  const std::string out = dir / "merged.pcapng";
  CmdResult r = run(softrdma_bin() + " trace merge " + (dir / "in0.pcapng") + " " +
                    (dir / "in1.pcapng") + " " + (dir / "classic.pcap") + " -o " + out);
  ASSERT_EQ(r.status, 0) << r.out;
  const Trace t = read_trace(out);
  ASSERT_EQ(t.ifaces.size(), 3u);
  EXPECT_EQ(t.ifaces[0].name, "dev0");
  EXPECT_EQ(t.ifaces[1].name, "dev1");
  EXPECT_EQ(t.ifaces[2].name, "classic.pcap");
  ASSERT_EQ(t.recs.size(), 21u);
  for (std::size_t k = 1; k < t.recs.size(); ++k) EXPECT_LE(t.recs[k - 1].ts_ns, t.recs[k].ts_ns);
  EXPECT_EQ(t.recs[0].comment, "softrdma: dir=tx dev=dev0 qp=0x000000");
  EXPECT_EQ(t.recs[0].iface, 0u);
  EXPECT_EQ(t.recs[1].comment, "softrdma: dir=tx dev=dev1 qp=0x000000");
  EXPECT_EQ(t.recs[1].iface, 1u);
  EXPECT_EQ(t.recs[1].flags, pcap::kEpbOutbound);
  int from_classic = 0;
  for (const auto& rec : t.recs) from_classic += rec.iface == 2;
  EXPECT_EQ(from_classic, 1);
  // libpcap reads the merged file too (all interfaces are Ethernet, one snaplen).
  auto lr = pcap::Reader::open(out, error);
  ASSERT_TRUE(lr) << error;
  pcap::Frame f;
  int n = 0;
  while (lr->next(f) == 1) ++n;
  EXPECT_EQ(n, 21) << lr->error();
}

TEST(TraceMerge, UsageAndUnreadableInput) {
  TempDir dir;
  const std::string bin = softrdma_bin();
  CmdResult r = run(bin + " trace");
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.out, "usage: softrdma trace merge")) << r.out;
  r = run(bin + " trace merge " + (dir / "a.pcapng"));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.out, "no output")) << r.out;
  r = run(bin + " trace merge -o " + (dir / "o.pcapng"));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.out, "no input")) << r.out;
  r = run(bin + " trace frobnicate");
  EXPECT_EQ(r.status, 2);
  r = run(bin + " trace merge " + (dir / "missing.pcapng") + " -o " + (dir / "o.pcapng"));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.out, "cannot read")) << r.out;
  {
    std::ofstream junk(dir / "junk.pcap");
    junk << "this is not a capture";
  }
  r = run(bin + " trace merge " + (dir / "junk.pcap") + " -o " + (dir / "o.pcapng"));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.out, "cannot read")) << r.out;
}
