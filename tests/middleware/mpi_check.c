/* An MPI program for the middleware tests and bench: point-to-point messages of every size from
 * 1 byte to 1 MiB between rank 0 and each other rank with their bytes checked, then allreduce,
 * alltoall, bcast and barrier with their results checked. Prints "mpi_check: rank R of N ok"
 * per rank and exits 0, or names what was wrong and exits 1.
 * "mpi_check pingpong": ranks 0 and 1 measure 8-byte one-way latency and 1 MiB bandwidth. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, bad;

static void fail(const char* what, long detail) {
  fprintf(stderr, "mpi_check: rank %d: %s (%ld)\n", rank, what, detail);
  bad = 1;
}

static unsigned char pattern(int from, int to, size_t len, size_t i) {
  return (unsigned char)(from * 31 + to * 7 + len + i * 13);
}

static void point_to_point(void) {
  const size_t max = 1 << 20;
  unsigned char* buf = malloc(max);
  for (size_t len = 1; len <= max; len *= 2) {
    for (int peer = 1; peer < size; ++peer) {
      if (rank == 0 || rank == peer) {
        const int other = rank == 0 ? peer : 0;
        /* rank 0 sends first, then the peer answers with its own pattern */
        for (int dir = 0; dir < 2; ++dir) {
          const int from = dir == 0 ? 0 : peer, to = dir == 0 ? peer : 0;
          if (rank == from) {
            for (size_t i = 0; i < len; ++i) buf[i] = pattern(from, to, len, i);
            MPI_Send(buf, (int)len, MPI_BYTE, other, (int)len, MPI_COMM_WORLD);
          } else {
            memset(buf, 0, len);
            MPI_Status st;
            MPI_Recv(buf, (int)len, MPI_BYTE, other, (int)len, MPI_COMM_WORLD, &st);
            int got = 0;
            MPI_Get_count(&st, MPI_BYTE, &got);
            if ((size_t)got != len) fail("short message", got);
            for (size_t i = 0; i < len; ++i) {
              if (buf[i] != pattern(from, to, len, i)) {
                fail("wrong byte in a message of length", (long)len);
                break;
              }
            }
          }
        }
      }
    }
  }
  free(buf);
}

static void collectives(void) {
  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (sum != (long)size * (size + 1) / 2) fail("allreduce sum", sum);
  const int per = 1024;
  int* out = malloc(sizeof(int) * per * size);
  int* in = malloc(sizeof(int) * per * size);
  for (int p = 0; p < size; ++p)
    for (int i = 0; i < per; ++i) out[p * per + i] = rank * 1000000 + p * 1000 + i % 1000;
  MPI_Alltoall(out, per, MPI_INT, in, per, MPI_INT, MPI_COMM_WORLD);
  for (int p = 0; p < size; ++p)
    for (int i = 0; i < per; ++i)
      if (in[p * per + i] != p * 1000000 + rank * 1000 + i % 1000) {
        fail("alltoall from rank", p);
        p = size;
        break;
      }
  const int n = 65536;
  unsigned char* b = malloc(n);
  for (int i = 0; i < n; ++i) b[i] = rank == 0 ? (unsigned char)(i * 5 + 1) : 0;
  MPI_Bcast(b, n, MPI_BYTE, 0, MPI_COMM_WORLD);
  for (int i = 0; i < n; ++i)
    if (b[i] != (unsigned char)(i * 5 + 1)) {
      fail("bcast byte", i);
      break;
    }
  MPI_Barrier(MPI_COMM_WORLD);
  free(out);
  free(in);
  free(b);
}

static void pingpong(void) {
  if (size < 2) return;
  static unsigned char buf[1 << 20];
  if (rank < 2) {
    const int other = 1 - rank;
    const int iters = 20000;
    for (int warm = 0; warm < 2; ++warm) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i) {
        if (rank == 0) {
          MPI_Send(buf, 8, MPI_BYTE, other, 1, MPI_COMM_WORLD);
          MPI_Recv(buf, 8, MPI_BYTE, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(buf, 8, MPI_BYTE, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(buf, 8, MPI_BYTE, other, 1, MPI_COMM_WORLD);
        }
      }
      const double t = MPI_Wtime() - t0;
      if (rank == 0 && warm) printf("mpi_check: latency 8 B one-way %.2f us\n", t / iters / 2 * 1e6);
    }
    const int reps = 400;
    for (int warm = 0; warm < 2; ++warm) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < reps; ++i) {
        if (rank == 0)
          MPI_Send(buf, sizeof buf, MPI_BYTE, other, 2, MPI_COMM_WORLD);
        else
          MPI_Recv(buf, sizeof buf, MPI_BYTE, other, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
      if (rank == 1) MPI_Send(buf, 1, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
      else MPI_Recv(buf, 1, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const double t = MPI_Wtime() - t0;
      if (rank == 0 && warm)
        printf("mpi_check: bandwidth 1 MiB %.0f MB/s\n", (double)reps * sizeof buf / t / 1e6);
    }
  } else {
    for (int k = 0; k < 4; ++k) MPI_Barrier(MPI_COMM_WORLD);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && strcmp(argv[1], "pingpong") == 0) {
    pingpong();
  } else {
    point_to_point();
    collectives();
  }
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!bad) printf("mpi_check: rank %d of %d ok\n", rank, size);
  fflush(stdout);
  MPI_Finalize();
  return any ? 1 : 0;
}
