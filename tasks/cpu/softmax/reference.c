/* Trusted reference: three passes in double precision. */
#include <math.h>
#include <stdint.h>

void softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        double m = -INFINITY;
        for (int64_t c = 0; c < cols; c++)
            if (xr[c] > m) m = xr[c];
        double s = 0.0;
        for (int64_t c = 0; c < cols; c++)
            s += exp((double)xr[c] - m);
        for (int64_t c = 0; c < cols; c++)
            yr[c] = (float)(exp((double)xr[c] - m) / s);
    }
}
