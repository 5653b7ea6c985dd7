/* An MPI job's traffic for tests/shared_device.rs: 100 round trips of 1 MiB between ranks 0 and 1
 * (data checked) and an allreduce over all ranks. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size; MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
  static char buf[1 << 20];
  for (int i = 0; i < 100; i++) {
    if (rank == 0) { memset(buf, i, sizeof buf); MPI_Send(buf, sizeof buf, MPI_CHAR, 1, 0, MPI_COMM_WORLD); MPI_Recv(buf, sizeof buf, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
    else if (rank == 1) { MPI_Recv(buf, sizeof buf, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); if (buf[12345] != (char)i) { printf("bad data\n"); MPI_Abort(MPI_COMM_WORLD, 1);} MPI_Send(buf, sizeof buf, MPI_CHAR, 0, 0, MPI_COMM_WORLD); }
  }
  long v = rank + 1, sum = 0; MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("pingpong ok, allreduce %ld (want %d)\n", sum, size * (size + 1) / 2);
  MPI_Finalize(); return 0;
}
