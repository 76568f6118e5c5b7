/* The pattern of perftest's -R between its two connections, made certain: the server takes one
 * connection, closes its listener, and listens on the same port again GAP_MS later; the client
 * connects a second time at once, so its SYN finds nobody listening (a reset) and the connect
 * must still succeed once the listener is back (the CM connects again for a while).
 *
 *   cm_relisten server ADDRESS PORT GAP_MS   prints "gap N ms" (how long nobody listened)
 *   cm_relisten client ADDRESS PORT          prints "connected twice"
 * Exit 0 when both connections were made, 1 otherwise (with the call that failed). */
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fail(const char* what) {
  fprintf(stderr, "%s: %s\n", what, strerror(errno));
  return 1;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static struct rdma_addrinfo* resolve(const char* addr, const char* port, int passive) {
  struct rdma_addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_port_space = RDMA_PS_TCP;
  if (passive) hints.ai_flags = RAI_PASSIVE;
  return rdma_getaddrinfo(addr, port, &hints, &res) ? NULL : res;
}

static void qp_attr(struct ibv_qp_init_attr* a) {
  memset(a, 0, sizeof *a);
  a->cap.max_send_wr = a->cap.max_recv_wr = 1;
  a->cap.max_send_sge = a->cap.max_recv_sge = 1;
  a->qp_type = IBV_QPT_RC;
  a->sq_sig_all = 1;
}

/* Listens, takes one request and closes the listener before accepting it. */
static int take_one(struct rdma_addrinfo* res, struct rdma_cm_id** conn, double* closed_at) {
  struct ibv_qp_init_attr attr;
  struct rdma_cm_id* listener = NULL;
  qp_attr(&attr);
  if (rdma_create_ep(&listener, res, NULL, &attr)) return fail("rdma_create_ep");
  if (rdma_listen(listener, 1)) return fail("rdma_listen");
  printf("listening\n");
  fflush(stdout);
  if (rdma_get_request(listener, conn)) return fail("rdma_get_request");
  rdma_destroy_ep(listener);
  *closed_at = now_ms();
  if (rdma_accept(*conn, NULL)) return fail("rdma_accept");
  return 0;
}

static int server(const char* addr, const char* port, int gap_ms) {
  struct rdma_addrinfo* res = resolve(addr, port, 1);
  struct rdma_cm_id *first = NULL, *second = NULL;
  double closed_at = 0, unused = 0;
  if (!res) return fail("rdma_getaddrinfo");
  if (take_one(res, &first, &closed_at)) return 1;
  usleep((useconds_t)gap_ms * 1000);
  printf("gap %.0f ms\n", now_ms() - closed_at);
  fflush(stdout);
  if (take_one(res, &second, &unused)) return 1;
  rdma_disconnect(first);
  rdma_disconnect(second);
  rdma_destroy_ep(first);
  rdma_destroy_ep(second);
  rdma_freeaddrinfo(res);
  return 0;
}

static int client(const char* addr, const char* port) {
  struct rdma_addrinfo* res = resolve(addr, port, 0);
  struct ibv_qp_init_attr attr;
  struct rdma_cm_id* ids[2] = {NULL, NULL};
  if (!res) return fail("rdma_getaddrinfo");
  for (int i = 0; i < 2; ++i) {
    qp_attr(&attr);
    if (rdma_create_ep(&ids[i], res, NULL, &attr)) return fail("rdma_create_ep");
    if (rdma_connect(ids[i], NULL)) return fail(i ? "second rdma_connect" : "first rdma_connect");
  }
  printf("connected twice\n");
  fflush(stdout);
  for (int i = 0; i < 2; ++i) {
    rdma_disconnect(ids[i]);
    rdma_destroy_ep(ids[i]);
  }
  rdma_freeaddrinfo(res);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 5 && strcmp(argv[1], "server") == 0) return server(argv[2], argv[3], atoi(argv[4]));
  if (argc == 4 && strcmp(argv[1], "client") == 0) return client(argv[2], argv[3]);
  fprintf(stderr, "usage: cm_relisten server ADDRESS PORT GAP_MS | client ADDRESS PORT\n");
  return 2;
}
