/* spray ffi test: MPI point-to-point (probe, any-source, sizes up to 3 MiB with data checks), allreduce, cancel. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, n; MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);
  int sizes[] = {1, 100, 5000, 70000, 1<<20, 3<<20};
  for (int s = 0; s < 6; s++) {
    int len = sizes[s]; char *b = malloc(len);
    for (int it = 0; it < 5; it++) {
      if (r == 0) { memset(b, it + s, len); MPI_Send(b, len, MPI_CHAR, 1, 7, MPI_COMM_WORLD); MPI_Recv(b, len, MPI_CHAR, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < len; i++) if (b[i] != (char)(it + s + 1)) { printf("BAD size %d it %d\n", len, it); MPI_Abort(MPI_COMM_WORLD, 1); } }
      else { MPI_Status st; int flag = 0; while (!flag) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        MPI_Recv(b, len, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < len; i++) b[i]++; MPI_Send(b, len, MPI_CHAR, 0, 8, MPI_COMM_WORLD); }
    }
    free(b);
  }
  double x = r + 1, y; MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Request q; int v = 0; if (r == 1) { MPI_Irecv(&v, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, &q); MPI_Cancel(&q); MPI_Wait(&q, MPI_STATUS_IGNORE); }
  MPI_Barrier(MPI_COMM_WORLD);
  if (r == 0) printf("OK allreduce=%g\n", y);
  MPI_Finalize(); return 0;
}
