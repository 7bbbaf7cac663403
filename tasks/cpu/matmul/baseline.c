/* Production baseline: OpenBLAS sgemm, single-threaded (OPENBLAS_NUM_THREADS=1 in the task).
 * The CBLAS prototype is declared here so no particular cblas.h layout is needed. */
#include <stdint.h>
#include <stdio.h>

enum { KS_ROW_MAJOR = 101, KS_NO_TRANS = 111 };
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
char *openblas_get_config(void);
char *openblas_get_corename(void);

void matmul(const float *restrict a, const float *restrict b, float *restrict c,
            int64_t m, int64_t n, int64_t k) {
    cblas_sgemm(KS_ROW_MAJOR, KS_NO_TRANS, KS_NO_TRANS, (int)m, (int)n, (int)k, 1.0f,
                a, (int)k, b, (int)n, 0.0f, c, (int)n);
}

/* What ksearch reports this baseline as running (docs/task-format.md): the OpenBLAS build and
 * the kernels it picked for this CPU. A CPU the library does not recognise gets generic kernels
 * (e.g. `Prescott`), several times slower than the ones for the machine. */
const char *ksearch_describe(void) {
    static char text[256];
    snprintf(text, sizeof text, "%s; core %s", openblas_get_config(), openblas_get_corename());
    return text;
}
