/* Naive seed: the textbook triple loop, one dot product per output element. */
#include <stdint.h>

void matmul(const float *restrict a, const float *restrict b, float *restrict c,
            int64_t m, int64_t n, int64_t k) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float s = 0.0f;
            for (int64_t p = 0; p < k; p++)
                s += a[i * k + p] * b[p * n + j];
            c[i * n + j] = s;
        }
}
