/* One RC or UD QP on the first verbs device, driven line by line from stdin, so that a
 * Python peer speaking RoCEv2 on the wire itself (nicpeer.py) knows its QPN, PSN, buffer
 * and rkey, and sees its completions and memory.
 *
 * usage: nicpeer_qp rc|ud
 * prints  QP qpn=N psn=N addr=N rkey=N qkey=N
 * commands (one a line; each answers one or more lines, the last "OK" or "ERR ..."):
 *   connect QPN PSN IPV4          RC: INIT->RTR->RTS to that QP (GID index 1, MTU 1024)
 *   recv OFF LEN WRID             post a receive of buf[OFF..OFF+LEN)
 *   send OFF LEN WRID             post a SEND (RC)
 *   write OFF LEN RADDR RKEY WRID post an RDMA WRITE
 *   read OFF LEN RADDR RKEY WRID  post an RDMA READ
 *   poll N MS                     up to N completions within MS ms: "WC wr= status= op= len= ..."
 *   put OFF HEX                   write bytes into buf
 *   dump OFF LEN                  "DATA HEX"
 *   state                         "STATE n" (ibv_qp_state)
 */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (1u << 20)
#define QKEY 0x11111111u

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static unsigned char *buf;
static int is_rc;
static uint32_t my_psn;

static void die(const char *what) {
  fprintf(stdout, "FATAL %s\n", what);
  fflush(stdout);
  exit(1);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int to_init(void) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (is_rc) {
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE |
                        IBV_ACCESS_REMOTE_ATOMIC;
    mask |= IBV_QP_ACCESS_FLAGS;
  } else {
    a.qkey = QKEY;
    mask |= IBV_QP_QKEY;
  }
  return ibv_modify_qp(qp, &a, mask);
}

static int ud_ready(void) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) return -1;
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = my_psn;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static int rc_connect(uint32_t dqpn, uint32_t dpsn, const char *ipv4) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dqpn;
  a.rq_psn = dpsn;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.grh.hop_limit = 64;
  unsigned char *g = a.ah_attr.grh.dgid.raw;
  g[10] = 0xff;
  g[11] = 0xff;
  if (inet_pton(AF_INET, ipv4, g + 12) != 1) return -1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return -1;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = my_psn;
  a.timeout = 16; /* ~268 ms: the peer answers well before it */
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 4;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                           IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int post_send(enum ibv_wr_opcode op, unsigned off, unsigned len, uint64_t raddr,
                     uint32_t rkey, uint64_t wrid) {
  struct ibv_sge sge = {.addr = (uintptr_t)(buf + off), .length = len, .lkey = mr->lkey};
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = wrid;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  return ibv_post_send(qp, &wr, &bad);
}

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "rc") && strcmp(argv[1], "ud"))) {
    fprintf(stderr, "usage: nicpeer_qp rc|ud\n");
    return 2;
  }
  is_rc = !strcmp(argv[1], "rc");
  int n;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n < 1) die("no device");
  ctx = ibv_open_device(list[0]);
  if (!ctx) die("ibv_open_device");
  pd = ibv_alloc_pd(ctx);
  if (!pd) die("ibv_alloc_pd");
  buf = aligned_alloc(4096, BUF_SIZE);
  if (!buf) die("alloc");
  memset(buf, 0, BUF_SIZE);
  mr = ibv_reg_mr(pd, buf, BUF_SIZE,
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                      IBV_ACCESS_REMOTE_ATOMIC);
  if (!mr) die("ibv_reg_mr");
  cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
  if (!cq) die("ibv_create_cq");
  struct ibv_qp_init_attr ia;
  memset(&ia, 0, sizeof ia);
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = is_rc ? IBV_QPT_RC : IBV_QPT_UD;
  ia.cap.max_send_wr = 64;
  ia.cap.max_recv_wr = 64;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  qp = ibv_create_qp(pd, &ia);
  if (!qp) die("ibv_create_qp");
  srand48(getpid());
  my_psn = lrand48() & 0xffffff;
  if (to_init()) die("INIT");
  if (!is_rc && ud_ready()) die("RTS");
  printf("QP qpn=%u psn=%u addr=%llu rkey=%u qkey=%u\n", qp->qp_num, my_psn,
         (unsigned long long)(uintptr_t)buf, mr->rkey, QKEY);
  fflush(stdout);

  char line[1u << 16];
  while (fgets(line, sizeof line, stdin)) {
    char cmd[32] = "";
    unsigned off = 0, len = 0, cnt = 0, ms = 0, a1 = 0, a2 = 0;
    unsigned long long raddr = 0, wrid = 0;
    char text[sizeof line];
    int rc = 0;
    if (sscanf(line, "%31s", cmd) != 1) continue;
    if (!strcmp(cmd, "connect")) {
      if (sscanf(line, "%*s %u %u %63s", &a1, &a2, text) != 3) goto bad;
      rc = rc_connect(a1, a2, text);
    } else if (!strcmp(cmd, "recv")) {
      if (sscanf(line, "%*s %u %u %llu", &off, &len, &wrid) != 3 || off + len > BUF_SIZE) goto bad;
      struct ibv_sge sge = {.addr = (uintptr_t)(buf + off), .length = len, .lkey = mr->lkey};
      struct ibv_recv_wr wr = {.wr_id = wrid, .sg_list = &sge, .num_sge = 1}, *badr;
      rc = ibv_post_recv(qp, &wr, &badr);
    } else if (!strcmp(cmd, "send")) {
      if (sscanf(line, "%*s %u %u %llu", &off, &len, &wrid) != 3 || off + len > BUF_SIZE) goto bad;
      rc = post_send(IBV_WR_SEND, off, len, 0, 0, wrid);
    } else if (!strcmp(cmd, "write") || !strcmp(cmd, "read")) {
      if (sscanf(line, "%*s %u %u %llu %u %llu", &off, &len, &raddr, &a1, &wrid) != 5 ||
          off + len > BUF_SIZE)
        goto bad;
      rc = post_send(cmd[0] == 'w' ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ, off, len, raddr, a1,
                     wrid);
    } else if (!strcmp(cmd, "poll")) {
      if (sscanf(line, "%*s %u %u", &cnt, &ms) != 2) goto bad;
      double end = now_ms() + ms;
      unsigned got = 0;
      while (got < cnt && now_ms() < end) {
        struct ibv_wc wc;
        int k = ibv_poll_cq(cq, 1, &wc);
        if (k < 0) die("ibv_poll_cq");
        if (k == 0) {
          struct timespec ts = {0, 200000};
          nanosleep(&ts, NULL);
          continue;
        }
        ++got;
        printf("WC wr=%llu status=%d op=%d len=%u imm=%u src_qp=%u flags=%u\n",
               (unsigned long long)wc.wr_id, wc.status, wc.opcode, wc.byte_len,
               ntohl(wc.imm_data), wc.src_qp, wc.wc_flags);
      }
    } else if (!strcmp(cmd, "put")) {
      if (sscanf(line, "%*s %u %s", &off, text) != 2) goto bad;
      size_t l = strlen(text) / 2;
      if (off + l > BUF_SIZE) goto bad;
      for (size_t i = 0; i < l; ++i) {
        unsigned v;
        sscanf(text + 2 * i, "%2x", &v);
        buf[off + i] = (unsigned char)v;
      }
    } else if (!strcmp(cmd, "dump")) {
      if (sscanf(line, "%*s %u %u", &off, &len) != 2 || off + len > BUF_SIZE || len > 30000)
        goto bad;
      printf("DATA ");
      for (unsigned i = 0; i < len; ++i) printf("%02x", buf[off + i]);
      printf("\n");
    } else if (!strcmp(cmd, "state")) {
      struct ibv_qp_attr a;
      struct ibv_qp_init_attr i2;
      rc = ibv_query_qp(qp, &a, IBV_QP_STATE, &i2);
      if (!rc) printf("STATE %d\n", a.qp_state);
    } else if (!strcmp(cmd, "quit")) {
      break;
    } else {
      goto bad;
    }
    if (rc)
      printf("ERR %d\n", rc);
    else
      printf("OK\n");
    fflush(stdout);
    continue;
  bad:
    printf("ERR bad command: %s", line);
    fflush(stdout);
  }
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dereg_mr(mr);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
