/* The softrdma Wireshark 4.0 plugin: a post-dissector that verifies RoCEv2 ICRCs, decodes
 * RFC 6581 (MPA revision 2) IRD/ORD words, the headers of IBTA 1.5's FLUSH and ATOMIC WRITE and
 * of XRC's opcodes (annex A14: Wireshark 4.0 names them and decodes nothing after the BTH), and
 * turns softrdma packet comments into fields. */
#include <ctype.h>
#include <epan/expert.h>
#include <epan/packet.h>
#include <epan/proto.h>
#include <stdlib.h>
#include <string.h>
#include <wiretap/wtap.h>
#include <wiretap/wtap_opttypes.h>
#include <ws_version.h>

#define ROCEV2_PORT 4791
#define BTH_LEN 12
#define ICRC_LEN 4
#define MPA_KEY_LEN 16
#define MPA_FLAG_ENHANCED 0x10
#define OP_RC_FLUSH 0x1C        /* IBTA 1.5 annex A19: BTH | FETH | RETH */
#define OP_RC_ATOMIC_WRITE 0x1D /* BTH | RETH | 8 bytes */
#define FETH_LEN 4
#define RETH_LEN 16
#define XRCETH_LEN 4
#define AETH_LEN 4
#define ATOMICETH_LEN 28
#define ATOMICACKETH_LEN 8
#define IMMDT_LEN 4
#define IETH_LEN 4
#define OP_XRC_FIRST 0xA0
#define OP_XRC_LAST 0xB7

#ifndef SOFTRDMA_PLUGIN_VERSION
#define SOFTRDMA_PLUGIN_VERSION "0.1.0"
#endif

WS_DLL_PUBLIC_DEF const gchar plugin_version[] = SOFTRDMA_PLUGIN_VERSION;
WS_DLL_PUBLIC_DEF const int plugin_want_major = WIRESHARK_VERSION_MAJOR;
WS_DLL_PUBLIC_DEF const int plugin_want_minor = WIRESHARK_VERSION_MINOR;
WS_DLL_PUBLIC void plugin_register(void);

static int proto_softrdma = -1;

static int hf_icrc_computed = -1;
static int hf_icrc_status = -1;
static int hf_mpa_ird = -1;
static int hf_mpa_ord = -1;
static int hf_mpa_p2p = -1;
static int hf_mpa_rtr_send = -1;
static int hf_mpa_rtr_write = -1;
static int hf_mpa_rtr_read = -1;
static int hf_dir = -1;
static int hf_dev = -1;
static int hf_qp = -1;
static int hf_fault = -1;
static int hf_drop = -1;
static int hf_retrans = -1;
static int hf_feth_placement = -1;
static int hf_feth_selectivity = -1;
static int hf_reth_va = -1;
static int hf_reth_rkey = -1;
static int hf_reth_dmalen = -1;
static int hf_atomic_write_data = -1;
static int hf_xrc_opcode = -1;
static int hf_xrceth_srqn = -1;
static int hf_atomiceth_va = -1;
static int hf_atomiceth_rkey = -1;
static int hf_atomiceth_swap = -1;
static int hf_atomiceth_cmp = -1;
static int hf_aeth_syndrome = -1;
static int hf_aeth_msn = -1;
static int hf_atomicacketh_orig = -1;
static int hf_immdt = -1;
static int hf_ieth = -1;

static gint ett_softrdma = -1;
static gint ett_icrc = -1;
static gint ett_mpa = -1;
static gint ett_annotation = -1;
static gint ett_ibta15 = -1;
static gint ett_xrc = -1;

static expert_field ei_bad_icrc = EI_INIT;
static expert_field ei_bad_annotation = EI_INIT;

enum { ICRC_UNVERIFIED = 0, ICRC_GOOD = 1, ICRC_BAD = 2 };
static const value_string icrc_status_vals[] = {
    {ICRC_UNVERIFIED, "unverified"}, {ICRC_GOOD, "good"}, {ICRC_BAD, "bad"}, {0, NULL}};

/* Where the layers of one captured frame start, as far as this plugin needs them. */
typedef struct {
  gboolean ipv6;
  guint ip_off, ip_hdr_len;
  guint8 l4_proto;
  guint l4_off, l4_len; /* the transport segment as the IP length gives it */
} frame_layers;

/* The reflected CRC-32 of zlib (polynomial 0xEDB88320), updated over `len` bytes; start from
 * 0xFFFFFFFF and complement the result. */
static guint32 crc32_update(guint32 crc, const guint8* p, guint len) {
  static guint32 table[256];
  static gboolean ready = FALSE;
  if (!ready) {
    for (guint32 i = 0; i < 256; i++) {
      guint32 c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = TRUE;
  }
  while (len--) crc = table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
  return crc;
}

/* Finds the IP header and the transport segment of a frame of the encapsulations softrdma
 * writes and reads (Ethernet with 802.1Q tags, Linux cooked v1/v2, raw IP). */
static gboolean find_layers(tvbuff_t* tvb, packet_info* pinfo, frame_layers* out) {
  guint off = 0;
  guint16 ethertype = 0;
  gint encap;
  const guint avail = tvb_captured_length(tvb);
  if (!pinfo->rec || pinfo->rec->rec_type != REC_TYPE_PACKET) return FALSE;
  encap = pinfo->rec->rec_header.packet_header.pkt_encap;
  switch (encap) {
    case WTAP_ENCAP_ETHERNET:
      if (avail < 14) return FALSE;
      off = 12;
      ethertype = tvb_get_ntohs(tvb, off);
      off += 2;
      while ((ethertype == 0x8100 || ethertype == 0x88A8) && avail >= off + 4) {
        ethertype = tvb_get_ntohs(tvb, off + 2);
        off += 4;
      }
      break;
    case WTAP_ENCAP_SLL:
      if (avail < 16) return FALSE;
      ethertype = tvb_get_ntohs(tvb, 14);
      off = 16;
      break;
    case WTAP_ENCAP_SLL2:
      if (avail < 20) return FALSE;
      ethertype = tvb_get_ntohs(tvb, 0);
      off = 20;
      break;
    case WTAP_ENCAP_RAW_IP:
    case WTAP_ENCAP_RAW_IP4:
    case WTAP_ENCAP_RAW_IP6:
      if (avail < 1) return FALSE;
      ethertype = (tvb_get_guint8(tvb, 0) >> 4) == 6 ? 0x86DD : 0x0800;
      break;
    default:
      return FALSE;
  }
  out->ip_off = off;
  if (ethertype == 0x0800) {
    guint total;
    if (avail < off + 20 || (tvb_get_guint8(tvb, off) >> 4) != 4) return FALSE;
    out->ipv6 = FALSE;
    out->ip_hdr_len = (guint)(tvb_get_guint8(tvb, off) & 0x0F) * 4;
    total = tvb_get_ntohs(tvb, off + 2);
    if (out->ip_hdr_len < 20 || total < out->ip_hdr_len) return FALSE;
    if ((tvb_get_ntohs(tvb, off + 6) & 0x3FFF) != 0) return FALSE; /* a fragment */
    out->l4_proto = tvb_get_guint8(tvb, off + 9);
    out->l4_off = off + out->ip_hdr_len;
    out->l4_len = total - out->ip_hdr_len;
  } else if (ethertype == 0x86DD) {
    if (avail < off + 40 || (tvb_get_guint8(tvb, off) >> 4) != 6) return FALSE;
    out->ipv6 = TRUE;
    out->ip_hdr_len = 40;
    out->l4_proto = tvb_get_guint8(tvb, off + 6); /* extension headers are not followed */
    out->l4_off = off + 40;
    out->l4_len = tvb_get_ntohs(tvb, off + 4);
  } else {
    return FALSE;
  }
  return TRUE;
}

/* ICRC of a RoCEv2 datagram (RoCEv2 annex A17.4.3): CRC-32 over eight 0xFF bytes, the IP
 * header with its variant fields set to ones, the UDP header with its checksum set to ones,
 * the BTH with byte 4 set to ones, and the rest up to the ICRC. Returned as the wire bytes
 * read most-significant first, as Wireshark shows infiniband.invariant.crc. */
static guint32 compute_icrc(tvbuff_t* tvb, const frame_layers* l) {
  static const guint8 ones[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  guint8 ip[60], udp_bth[8 + BTH_LEN];
  guint32 crc = 0xFFFFFFFFu, icrc;
  const guint rest_off = l->l4_off + 8 + BTH_LEN;
  const guint rest_len = l->l4_len - 8 - BTH_LEN - ICRC_LEN;
  tvb_memcpy(tvb, ip, l->ip_off, l->ip_hdr_len);
  if (l->ipv6) {
    ip[0] |= 0x0F; /* traffic class and flow label */
    ip[1] = ip[2] = ip[3] = 0xFF;
    ip[7] = 0xFF; /* hop limit */
  } else {
    ip[1] = 0xFF;           /* TOS */
    ip[8] = 0xFF;           /* TTL */
    ip[10] = ip[11] = 0xFF; /* header checksum */
  }
  tvb_memcpy(tvb, udp_bth, l->l4_off, sizeof udp_bth);
  udp_bth[6] = udp_bth[7] = 0xFF; /* UDP checksum */
  udp_bth[8 + 4] = 0xFF;          /* FECN, BECN, reserved */
  crc = crc32_update(crc, ones, sizeof ones);
  crc = crc32_update(crc, ip, l->ip_hdr_len);
  crc = crc32_update(crc, udp_bth, sizeof udp_bth);
  crc = crc32_update(crc, tvb_get_ptr(tvb, rest_off, rest_len), rest_len);
  crc = ~crc;
  /* The ICRC goes least-significant byte first; show it as those bytes read big-endian. */
  icrc = ((crc & 0xFF) << 24) | ((crc & 0xFF00) << 8) | ((crc >> 8) & 0xFF00) | (crc >> 24);
  return icrc;
}

static proto_tree* softrdma_tree(tvbuff_t* tvb, proto_tree* tree, proto_tree** root) {
  if (!*root) {
    proto_item* ti = proto_tree_add_item(tree, proto_softrdma, tvb, 0, 0, ENC_NA);
    *root = proto_item_add_subtree(ti, ett_softrdma);
  }
  return *root;
}

static void check_icrc(tvbuff_t* tvb, packet_info* pinfo, proto_tree* tree, proto_tree** root,
                       const frame_layers* l) {
  guint32 computed, on_wire;
  gboolean good;
  proto_item* ti;
  proto_tree* sub;
  if (l->l4_len < 8 + BTH_LEN + ICRC_LEN) return;
  if (tvb_captured_length(tvb) < l->l4_off + 8) return;
  if (tvb_get_ntohs(tvb, l->l4_off + 2) != ROCEV2_PORT) return;
  if (tvb_get_ntohs(tvb, l->l4_off + 4) != l->l4_len) return; /* UDP and IP lengths disagree */
  /* The whole datagram must have been captured. */
  if (tvb_captured_length(tvb) < l->l4_off + l->l4_len) return;
  computed = compute_icrc(tvb, l);
  on_wire = tvb_get_ntohl(tvb, l->l4_off + l->l4_len - ICRC_LEN);
  good = computed == on_wire;
  ti = proto_tree_add_item(softrdma_tree(tvb, tree, root), proto_softrdma, tvb,
                           l->l4_off + l->l4_len - ICRC_LEN, ICRC_LEN, ENC_NA);
  proto_item_set_text(ti, "RoCEv2 ICRC: %s", good ? "good" : "bad");
  sub = proto_item_add_subtree(ti, ett_icrc);
  ti = proto_tree_add_uint(sub, hf_icrc_computed, tvb, l->l4_off + l->l4_len - ICRC_LEN, ICRC_LEN,
                           computed);
  proto_item_set_generated(ti);
  ti = proto_tree_add_uint(sub, hf_icrc_status, tvb, l->l4_off + l->l4_len - ICRC_LEN, ICRC_LEN,
                           good ? ICRC_GOOD : ICRC_BAD);
  proto_item_set_generated(ti);
  if (!good) {
    proto_item_append_text(ti, " [should be 0x%08x, is 0x%08x]", computed, on_wire);
    expert_add_info(pinfo, ti, &ei_bad_icrc);
  }
}

static const value_string flush_placement_vals[] = {{1, "global visibility"},
                                                    {2, "persistence"},
                                                    {3, "global visibility and persistence"},
                                                    {0, NULL}};
static const value_string flush_selectivity_vals[] = {
    {0, "memory region range"}, {1, "memory region"}, {0, NULL}};

/* FLUSH and ATOMIC WRITE: their FETH and RETH and an ATOMIC WRITE's 8 bytes, as fields. */
static void decode_ibta15(tvbuff_t* tvb, proto_tree* tree, proto_tree** root,
                          const frame_layers* l) {
  guint off, need;
  guint8 opcode;
  proto_item* ti;
  proto_tree* sub;
  if (l->l4_len < 8 + BTH_LEN + ICRC_LEN || tvb_captured_length(tvb) < l->l4_off + 8 + 1) return;
  if (tvb_get_ntohs(tvb, l->l4_off + 2) != ROCEV2_PORT) return;
  off = l->l4_off + 8;
  opcode = tvb_get_guint8(tvb, off);
  if (opcode != OP_RC_FLUSH && opcode != OP_RC_ATOMIC_WRITE) return;
  need = BTH_LEN + (opcode == OP_RC_FLUSH ? FETH_LEN : 8) + RETH_LEN + ICRC_LEN;
  if (l->l4_len < 8 + need || !tvb_bytes_exist(tvb, off, need - ICRC_LEN)) return;
  off += BTH_LEN;
  ti = proto_tree_add_item(softrdma_tree(tvb, tree, root), proto_softrdma, tvb, off,
                           need - BTH_LEN - ICRC_LEN, ENC_NA);
  proto_item_set_text(ti, "IBTA 1.5 %s", opcode == OP_RC_FLUSH ? "FLUSH" : "ATOMIC WRITE");
  sub = proto_item_add_subtree(ti, ett_ibta15);
  if (opcode == OP_RC_FLUSH) {
    proto_tree_add_item(sub, hf_feth_selectivity, tvb, off, 4, ENC_BIG_ENDIAN);
    proto_tree_add_item(sub, hf_feth_placement, tvb, off, 4, ENC_BIG_ENDIAN);
    off += FETH_LEN;
  }
  proto_tree_add_item(sub, hf_reth_va, tvb, off, 8, ENC_BIG_ENDIAN);
  proto_tree_add_item(sub, hf_reth_rkey, tvb, off + 8, 4, ENC_BIG_ENDIAN);
  proto_tree_add_item(sub, hf_reth_dmalen, tvb, off + 12, 4, ENC_BIG_ENDIAN);
  if (opcode == OP_RC_ATOMIC_WRITE)
    proto_tree_add_item(sub, hf_atomic_write_data, tvb, off + RETH_LEN, 8, ENC_NA);
}

/* XRC (IBTA annex A14): RC's opcodes from 0xA0 (RESYNC, 0xB5, has none), its requests with the
 * XRCETH right after the BTH. The extended headers of each, by the low five bits. */
enum {
  H_REQ = 1,
  H_RETH = 2,
  H_ATOMICETH = 4,
  H_AETH = 8,
  H_ATOMICACK = 16,
  H_IMM = 32,
  H_IETH = 64
};
typedef struct {
  const char* name;
  guint8 headers;
} xrc_shape;
static const xrc_shape xrc_shapes[0x18] = {
    {"SEND_FIRST", H_REQ},
    {"SEND_MIDDLE", H_REQ},
    {"SEND_LAST", H_REQ},
    {"SEND_LAST_WITH_IMMEDIATE", H_REQ | H_IMM},
    {"SEND_ONLY", H_REQ},
    {"SEND_ONLY_WITH_IMMEDIATE", H_REQ | H_IMM},
    {"RDMA_WRITE_FIRST", H_REQ | H_RETH},
    {"RDMA_WRITE_MIDDLE", H_REQ},
    {"RDMA_WRITE_LAST", H_REQ},
    {"RDMA_WRITE_LAST_WITH_IMMEDIATE", H_REQ | H_IMM},
    {"RDMA_WRITE_ONLY", H_REQ | H_RETH},
    {"RDMA_WRITE_ONLY_WITH_IMMEDIATE", H_REQ | H_RETH | H_IMM},
    {"RDMA_READ_REQUEST", H_REQ | H_RETH},
    {"RDMA_READ_RESPONSE_FIRST", H_AETH},
    {"RDMA_READ_RESPONSE_MIDDLE", 0},
    {"RDMA_READ_RESPONSE_LAST", H_AETH},
    {"RDMA_READ_RESPONSE_ONLY", H_AETH},
    {"ACKNOWLEDGE", H_AETH},
    {"ATOMIC_ACKNOWLEDGE", H_AETH | H_ATOMICACK},
    {"CMP_SWAP", H_REQ | H_ATOMICETH},
    {"FETCH_ADD", H_REQ | H_ATOMICETH},
    {NULL, 0},
    {"SEND_LAST_WITH_INVALIDATE", H_REQ | H_IETH},
    {"SEND_ONLY_WITH_INVALIDATE", H_REQ | H_IETH},
};

static guint xrc_headers_len(guint8 h) {
  return ((h & H_REQ) ? XRCETH_LEN : 0) + ((h & H_RETH) ? RETH_LEN : 0) +
         ((h & H_ATOMICETH) ? ATOMICETH_LEN : 0) + ((h & H_AETH) ? AETH_LEN : 0) +
         ((h & H_ATOMICACK) ? ATOMICACKETH_LEN : 0) + ((h & H_IMM) ? IMMDT_LEN : 0) +
         ((h & H_IETH) ? IETH_LEN : 0);
}

/* An XRC packet's extended headers, in their IBTA order, as fields. */
static void decode_xrc(tvbuff_t* tvb, proto_tree* tree, proto_tree** root, const frame_layers* l) {
  guint off, len;
  guint8 opcode, h;
  const xrc_shape* shape;
  proto_item* ti;
  proto_tree* sub;
  if (l->l4_len < 8 + BTH_LEN + ICRC_LEN || tvb_captured_length(tvb) < l->l4_off + 8 + 1) return;
  if (tvb_get_ntohs(tvb, l->l4_off + 2) != ROCEV2_PORT) return;
  off = l->l4_off + 8;
  opcode = tvb_get_guint8(tvb, off);
  if (opcode < OP_XRC_FIRST || opcode > OP_XRC_LAST) return;
  shape = &xrc_shapes[opcode - OP_XRC_FIRST];
  if (!shape->name) return;
  h = shape->headers;
  len = xrc_headers_len(h);
  if (l->l4_len < 8 + BTH_LEN + len + ICRC_LEN || !tvb_bytes_exist(tvb, off, BTH_LEN + len)) return;
  ti = proto_tree_add_item(softrdma_tree(tvb, tree, root), proto_softrdma, tvb, off + BTH_LEN,
                           (gint)len, ENC_NA);
  proto_item_set_text(ti, "IBTA annex A14 XRC %s", shape->name);
  sub = proto_item_add_subtree(ti, ett_xrc);
  proto_tree_add_uint(sub, hf_xrc_opcode, tvb, off, 1, opcode);
  off += BTH_LEN;
  if (h & H_REQ) {
    proto_tree_add_item(sub, hf_xrceth_srqn, tvb, off, 4, ENC_BIG_ENDIAN);
    off += XRCETH_LEN;
  }
  if (h & H_RETH) {
    proto_tree_add_item(sub, hf_reth_va, tvb, off, 8, ENC_BIG_ENDIAN);
    proto_tree_add_item(sub, hf_reth_rkey, tvb, off + 8, 4, ENC_BIG_ENDIAN);
    proto_tree_add_item(sub, hf_reth_dmalen, tvb, off + 12, 4, ENC_BIG_ENDIAN);
    off += RETH_LEN;
  }
  if (h & H_ATOMICETH) {
    proto_tree_add_item(sub, hf_atomiceth_va, tvb, off, 8, ENC_BIG_ENDIAN);
    proto_tree_add_item(sub, hf_atomiceth_rkey, tvb, off + 8, 4, ENC_BIG_ENDIAN);
    proto_tree_add_item(sub, hf_atomiceth_swap, tvb, off + 12, 8, ENC_BIG_ENDIAN);
    proto_tree_add_item(sub, hf_atomiceth_cmp, tvb, off + 20, 8, ENC_BIG_ENDIAN);
    off += ATOMICETH_LEN;
  }
  if (h & H_AETH) {
    proto_tree_add_item(sub, hf_aeth_syndrome, tvb, off, 1, ENC_BIG_ENDIAN);
    proto_tree_add_item(sub, hf_aeth_msn, tvb, off + 1, 3, ENC_BIG_ENDIAN);
    off += AETH_LEN;
  }
  if (h & H_ATOMICACK) {
    proto_tree_add_item(sub, hf_atomicacketh_orig, tvb, off, 8, ENC_BIG_ENDIAN);
    off += ATOMICACKETH_LEN;
  }
  if (h & H_IMM) proto_tree_add_item(sub, hf_immdt, tvb, off, 4, ENC_BIG_ENDIAN);
  if (h & H_IETH) proto_tree_add_item(sub, hf_ieth, tvb, off, 4, ENC_BIG_ENDIAN);
}

static void decode_mpa(tvbuff_t* tvb, proto_tree* tree, proto_tree** root, const frame_layers* l) {
  guint tcp_hdr_len, off;
  guint8 flags, revision;
  proto_item* ti;
  proto_tree* sub;
  if (l->l4_len < 20 || tvb_captured_length(tvb) < l->l4_off + 20) return;
  tcp_hdr_len = (guint)(tvb_get_guint8(tvb, l->l4_off + 12) >> 4) * 4;
  if (tcp_hdr_len < 20 || l->l4_len < tcp_hdr_len + MPA_KEY_LEN + 4 + 4) return;
  off = l->l4_off + tcp_hdr_len;
  if (!tvb_bytes_exist(tvb, off, MPA_KEY_LEN + 4 + 4)) return;
  if (tvb_memeql(tvb, off, (const guint8*)"MPA ID Req Frame", MPA_KEY_LEN) != 0 &&
      tvb_memeql(tvb, off, (const guint8*)"MPA ID Rep Frame", MPA_KEY_LEN) != 0)
    return;
  flags = tvb_get_guint8(tvb, off + MPA_KEY_LEN);
  revision = tvb_get_guint8(tvb, off + MPA_KEY_LEN + 1);
  if (revision != 2 || !(flags & MPA_FLAG_ENHANCED)) return;
  if (tvb_get_ntohs(tvb, off + MPA_KEY_LEN + 2) < 4) return; /* PD_Length holds IRD/ORD */
  off += MPA_KEY_LEN + 4;
  ti = proto_tree_add_item(softrdma_tree(tvb, tree, root), proto_softrdma, tvb, off, 4, ENC_NA);
  proto_item_set_text(ti, "MPA revision 2 enhanced connection setup (RFC 6581): IRD %u, ORD %u",
                      tvb_get_ntohs(tvb, off) & 0x3FFF, tvb_get_ntohs(tvb, off + 2) & 0x3FFF);
  sub = proto_item_add_subtree(ti, ett_mpa);
  proto_tree_add_item(sub, hf_mpa_p2p, tvb, off, 2, ENC_BIG_ENDIAN);
  proto_tree_add_item(sub, hf_mpa_rtr_send, tvb, off, 2, ENC_BIG_ENDIAN);
  proto_tree_add_item(sub, hf_mpa_ird, tvb, off, 2, ENC_BIG_ENDIAN);
  proto_tree_add_item(sub, hf_mpa_rtr_write, tvb, off + 2, 2, ENC_BIG_ENDIAN);
  proto_tree_add_item(sub, hf_mpa_rtr_read, tvb, off + 2, 2, ENC_BIG_ENDIAN);
  proto_tree_add_item(sub, hf_mpa_ord, tvb, off + 2, 2, ENC_BIG_ENDIAN);
}

static gboolean one_of(const char* v, const char* const* allowed) {
  for (; *allowed; allowed++)
    if (strcmp(v, *allowed) == 0) return TRUE;
  return FALSE;
}

/* "softrdma: dir=tx dev=softroce0 qp=0x000011 fault=drop": space-separated key=value pairs. */
static void decode_annotation(tvbuff_t* tvb, packet_info* pinfo, proto_tree* tree,
                              proto_tree** root, const char* comment) {
  static const char prefix[] = "softrdma: ";
  static const char* const dirs[] = {"tx", "rx", NULL};
  static const char* const faults[] = {"none",    "drop",  "duplicate", "reorder",
                                       "corrupt", "delay", NULL};
  static const char* const drops[] = {"icrc", "malformed", "not_ours", "queue_full", NULL};
  gchar** words;
  proto_item* ti;
  proto_tree* sub;
  if (strncmp(comment, prefix, sizeof prefix - 1) != 0) return;
  ti = proto_tree_add_item(softrdma_tree(tvb, tree, root), proto_softrdma, tvb, 0, 0, ENC_NA);
  proto_item_set_text(ti, "softrdma annotation: %s", comment + sizeof prefix - 1);
  sub = proto_item_add_subtree(ti, ett_annotation);
  words = g_strsplit(comment + sizeof prefix - 1, " ", -1);
  for (gchar** w = words; *w; w++) {
    const char* eq = strchr(*w, '=');
    const char* value;
    gboolean ok = TRUE;
    proto_item* item = NULL;
    if (**w == '\0') continue;
    if (!eq) {
      expert_add_info_format(pinfo, ti, &ei_bad_annotation, "softrdma annotation without '=': %s",
                             *w);
      continue;
    }
    value = eq + 1;
    if (strncmp(*w, "dir=", 4) == 0) {
      ok = one_of(value, dirs);
      item = proto_tree_add_string(sub, hf_dir, tvb, 0, 0, value);
    } else if (strncmp(*w, "dev=", 4) == 0) {
      item = proto_tree_add_string(sub, hf_dev, tvb, 0, 0, value);
    } else if (strncmp(*w, "qp=", 3) == 0) {
      char* end = NULL;
      const unsigned long qp = strtoul(value, &end, 16);
      ok = *value != '\0' && end && *end == '\0' && qp <= 0xFFFFFF;
      if (ok) item = proto_tree_add_uint(sub, hf_qp, tvb, 0, 0, (guint32)qp);
    } else if (strncmp(*w, "fault=", 6) == 0) {
      ok = one_of(value, faults);
      item = proto_tree_add_string(sub, hf_fault, tvb, 0, 0, value);
    } else if (strncmp(*w, "drop=", 5) == 0) {
      ok = one_of(value, drops);
      item = proto_tree_add_string(sub, hf_drop, tvb, 0, 0, value);
    } else if (strncmp(*w, "retrans=", 8) == 0) {
      ok = strcmp(value, "1") == 0;
      if (ok) item = proto_tree_add_boolean(sub, hf_retrans, tvb, 0, 0, TRUE);
    } else {
      ok = FALSE;
    }
    if (item) proto_item_set_generated(item);
    if (!ok) {
      expert_add_info_format(pinfo, item ? item : ti, &ei_bad_annotation,
                             "Unknown softrdma annotation %s", *w);
    }
  }
  g_strfreev(words);
}

static int dissect_softrdma(tvbuff_t* tvb, packet_info* pinfo, proto_tree* tree, void* data _U_) {
  proto_tree* root = NULL;
  frame_layers l;
  memset(&l, 0, sizeof l);
  if (pinfo->rec && pinfo->rec->block) {
    const guint n = wtap_block_count_option(pinfo->rec->block, OPT_COMMENT);
    for (guint i = 0; i < n; i++) {
      char* comment = NULL;
      if (wtap_block_get_nth_string_option_value(pinfo->rec->block, OPT_COMMENT, i, &comment) ==
              WTAP_OPTTYPE_SUCCESS &&
          comment)
        decode_annotation(tvb, pinfo, tree, &root, comment);
    }
  }
  if (find_layers(tvb, pinfo, &l)) {
    if (l.l4_proto == 17) {
      check_icrc(tvb, pinfo, tree, &root, &l);
      decode_ibta15(tvb, tree, &root, &l);
      decode_xrc(tvb, tree, &root, &l);
    }
    if (l.l4_proto == 6) decode_mpa(tvb, tree, &root, &l);
  }
  return root ? (int)tvb_captured_length(tvb) : 0;
}

static void proto_register_softrdma(void) {
  static hf_register_info hf[] = {
      {&hf_icrc_computed,
       {"Computed ICRC", "softrdma.icrc.computed", FT_UINT32, BASE_HEX, NULL, 0x0,
        "The ICRC this RoCEv2 packet should carry, as its four wire bytes", HFILL}},
      {&hf_icrc_status,
       {"ICRC status", "softrdma.icrc.status", FT_UINT8, BASE_NONE, VALS(icrc_status_vals), 0x0,
        "Whether the ICRC on the wire matches the computed one", HFILL}},
      {&hf_mpa_p2p,
       {"Peer-to-peer", "softrdma.mpa.p2p", FT_BOOLEAN, 16, NULL, 0x8000,
        "RFC 6581 peer-to-peer mode (IRD word)", HFILL}},
      {&hf_mpa_rtr_send,
       {"Zero-length SEND RTR", "softrdma.mpa.rtr_send", FT_BOOLEAN, 16, NULL, 0x4000,
        "RFC 6581 ready-to-receive by a zero-length SEND (IRD word)", HFILL}},
      {&hf_mpa_ird,
       {"IRD", "softrdma.mpa.ird", FT_UINT16, BASE_DEC, NULL, 0x3FFF,
        "RFC 6581 inbound RDMA read queue depth", HFILL}},
      {&hf_mpa_rtr_write,
       {"Zero-length WRITE RTR", "softrdma.mpa.rtr_write", FT_BOOLEAN, 16, NULL, 0x8000,
        "RFC 6581 ready-to-receive by a zero-length RDMA WRITE (ORD word)", HFILL}},
      {&hf_mpa_rtr_read,
       {"Zero-length READ RTR", "softrdma.mpa.rtr_read", FT_BOOLEAN, 16, NULL, 0x4000,
        "RFC 6581 ready-to-receive by a zero-length RDMA READ (ORD word)", HFILL}},
      {&hf_mpa_ord,
       {"ORD", "softrdma.mpa.ord", FT_UINT16, BASE_DEC, NULL, 0x3FFF,
        "RFC 6581 outbound RDMA read queue depth", HFILL}},
      {&hf_dir,
       {"Direction", "softrdma.dir", FT_STRING, BASE_NONE, NULL, 0x0,
        "tx: recorded as sent (before fault injection); rx: as received (after it)", HFILL}},
      {&hf_dev, {"Device", "softrdma.dev", FT_STRING, BASE_NONE, NULL, 0x0, NULL, HFILL}},
      {&hf_qp, {"QP", "softrdma.qp", FT_UINT32, BASE_HEX, NULL, 0x0, NULL, HFILL}},
      {&hf_fault,
       {"Injected fault", "softrdma.fault", FT_STRING, BASE_NONE, NULL, 0x0, NULL, HFILL}},
      {&hf_drop, {"Drop reason", "softrdma.drop", FT_STRING, BASE_NONE, NULL, 0x0, NULL, HFILL}},
      {&hf_retrans,
       {"Retransmission", "softrdma.retrans", FT_BOOLEAN, BASE_NONE, NULL, 0x0, NULL, HFILL}},
      {&hf_feth_placement,
       {"Placement type", "softrdma.feth.placement", FT_UINT32, BASE_DEC,
        VALS(flush_placement_vals), 0x0000000F, "FLUSH extended transport header, bits 3-0",
        HFILL}},
      {&hf_feth_selectivity,
       {"Selectivity level", "softrdma.feth.selectivity", FT_UINT32, BASE_DEC,
        VALS(flush_selectivity_vals), 0x00000030, "FLUSH extended transport header, bits 5-4",
        HFILL}},
      {&hf_reth_va,
       {"Virtual address", "softrdma.reth.va", FT_UINT64, BASE_HEX, NULL, 0x0,
        "RETH of a FLUSH, an ATOMIC WRITE or an XRC request", HFILL}},
      {&hf_reth_rkey,
       {"Remote key", "softrdma.reth.rkey", FT_UINT32, BASE_HEX, NULL, 0x0,
        "RETH of a FLUSH, an ATOMIC WRITE or an XRC request", HFILL}},
      {&hf_reth_dmalen,
       {"DMA length", "softrdma.reth.dmalen", FT_UINT32, BASE_DEC, NULL, 0x0,
        "RETH of a FLUSH, an ATOMIC WRITE or an XRC request", HFILL}},
      {&hf_atomic_write_data,
       {"Atomic write data", "softrdma.atomic_write.data", FT_BYTES, BASE_NONE, NULL, 0x0,
        "The 8 bytes an ATOMIC WRITE stores", HFILL}},
      {&hf_xrc_opcode,
       {"XRC opcode", "softrdma.xrc.opcode", FT_UINT8, BASE_HEX, NULL, 0x0,
        "An opcode of the XRC transport (IBTA annex A14)", HFILL}},
      {&hf_xrceth_srqn,
       {"XRC SRQ number", "softrdma.xrceth.srqn", FT_UINT32, BASE_HEX, NULL, 0x00FFFFFF,
        "XRCETH: the XRC SRQ at the target that takes the message", HFILL}},
      {&hf_atomiceth_va,
       {"Virtual address", "softrdma.atomiceth.va", FT_UINT64, BASE_HEX, NULL, 0x0,
        "AtomicETH of an XRC atomic", HFILL}},
      {&hf_atomiceth_rkey,
       {"Remote key", "softrdma.atomiceth.rkey", FT_UINT32, BASE_HEX, NULL, 0x0,
        "AtomicETH of an XRC atomic", HFILL}},
      {&hf_atomiceth_swap,
       {"Swap (or add) data", "softrdma.atomiceth.swap", FT_UINT64, BASE_DEC, NULL, 0x0,
        "AtomicETH of an XRC atomic", HFILL}},
      {&hf_atomiceth_cmp,
       {"Compare data", "softrdma.atomiceth.cmp", FT_UINT64, BASE_DEC, NULL, 0x0,
        "AtomicETH of an XRC atomic", HFILL}},
      {&hf_aeth_syndrome,
       {"Syndrome", "softrdma.aeth.syndrome", FT_UINT8, BASE_HEX, NULL, 0x0,
        "AETH of an XRC response", HFILL}},
      {&hf_aeth_msn,
       {"MSN", "softrdma.aeth.msn", FT_UINT24, BASE_DEC, NULL, 0x0, "AETH of an XRC response",
        HFILL}},
      {&hf_atomicacketh_orig,
       {"Original remote data", "softrdma.atomicacketh.orig", FT_UINT64, BASE_DEC, NULL, 0x0,
        "AtomicAckETH of an XRC atomic acknowledge", HFILL}},
      {&hf_immdt,
       {"Immediate data", "softrdma.immdt", FT_UINT32, BASE_HEX, NULL, 0x0,
        "ImmDt of an XRC request", HFILL}},
      {&hf_ieth,
       {"Invalidated rkey", "softrdma.ieth", FT_UINT32, BASE_HEX, NULL, 0x0,
        "IETH of an XRC SEND with invalidate", HFILL}},
  };
  static gint* ett[] = {&ett_softrdma, &ett_icrc, &ett_mpa, &ett_annotation, &ett_ibta15, &ett_xrc};
  static ei_register_info ei[] = {
      {&ei_bad_icrc, {"softrdma.icrc.bad", PI_CHECKSUM, PI_ERROR, "Bad ICRC", EXPFILL}},
      {&ei_bad_annotation,
       {"softrdma.annotation.unknown", PI_MALFORMED, PI_WARN, "Unknown softrdma annotation",
        EXPFILL}},
  };
  expert_module_t* expert;
  proto_softrdma =
      proto_register_protocol("softrdma checks and annotations", "softrdma", "softrdma");
  proto_register_field_array(proto_softrdma, hf, array_length(hf));
  proto_register_subtree_array(ett, array_length(ett));
  expert = expert_register_protocol(proto_softrdma);
  expert_register_field_array(expert, ei, array_length(ei));
}

static void proto_reg_handoff_softrdma(void) {
  register_postdissector(create_dissector_handle(dissect_softrdma, proto_softrdma));
}

void plugin_register(void) {
  static proto_plugin plug;
  plug.register_protoinfo = proto_register_softrdma;
  plug.register_handoff = proto_reg_handoff_softrdma;
  proto_register_plugin(&plug);
}
