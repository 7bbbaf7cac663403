/* Naive seed: max, exponentiate and sum, divide; scalar float. */
#include <math.h>
#include <stdint.h>

void softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        float m = x[r * cols];
        for (int64_t c = 1; c < cols; c++)
            if (x[r * cols + c] > m) m = x[r * cols + c];
        float s = 0.0f;
        for (int64_t c = 0; c < cols; c++) {
            y[r * cols + c] = expf(x[r * cols + c] - m);
            s += y[r * cols + c];
        }
        for (int64_t c = 0; c < cols; c++)
            y[r * cols + c] = y[r * cols + c] / s;
    }
}
