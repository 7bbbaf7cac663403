/* Naive seed: the sequential recurrence, one row at a time. */
#include <stdint.h>

void linear_recurrence(const float *restrict a, const float *restrict b, float *restrict h,
                       int64_t rows, int64_t len) {
    for (int64_t r = 0; r < rows; r++) {
        float x = 0.0f;
        for (int64_t t = 0; t < len; t++) {
            x = a[r * len + t] * x + b[r * len + t];
            h[r * len + t] = x;
        }
    }
}
