/* Trusted reference: the sequential recurrence in double precision. */
#include <stdint.h>

void linear_recurrence(const float *restrict a, const float *restrict b, float *restrict h,
                       int64_t rows, int64_t len) {
    for (int64_t r = 0; r < rows; r++) {
        double x = 0.0;
        for (int64_t t = 0; t < len; t++) {
            x = (double)a[r * len + t] * x + (double)b[r * len + t];
            h[r * len + t] = (float)x;
        }
    }
}
