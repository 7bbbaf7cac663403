/* Reference: RMSNorm with the sum of squares in double precision. */
#include <math.h>
#include <stdint.h>

void rmsnorm(const float *restrict x, const float *restrict w, float *restrict y, int64_t rows,
             int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0.0;
        for (int64_t c = 0; c < cols; c++) ss += (double)x[r * cols + c] * x[r * cols + c];
        const double inv = 1.0 / sqrt(ss / (double)cols + 1e-6);
        for (int64_t c = 0; c < cols; c++) y[r * cols + c] = (float)(x[r * cols + c] * inv * w[c]);
    }
}
