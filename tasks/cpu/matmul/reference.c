/* Trusted reference: i-k-j loop order with double-precision accumulators. */
#include <stdint.h>
#include <stdlib.h>

void matmul(const float *restrict a, const float *restrict b, float *restrict c,
            int64_t m, int64_t n, int64_t k) {
    double *acc = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) acc[j] = 0.0;
        for (int64_t p = 0; p < k; p++) {
            double aip = a[i * k + p];
            const float *bp = b + p * n;
            for (int64_t j = 0; j < n; j++) acc[j] += aip * (double)bp[j];
        }
        for (int64_t j = 0; j < n; j++) c[i * n + j] = (float)acc[j];
    }
    free(acc);
}
