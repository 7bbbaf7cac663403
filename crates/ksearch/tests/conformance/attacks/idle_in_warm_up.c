/* An attack on the unchecked warm-up (judge round 3): it does nothing in the first hundred
 * thousand calls after checking (the warm-up, whose last batch sizes its batches), so that it
 * looks instantly fast and is given the longest batches and the largest pools the judge makes
 * (gigabytes of shared memory), then works honestly. */
#include <math.h>
#include <stdint.h>
#include <time.h>

static void row(const float *x, float *y, int64_t cols) {
    float m = x[0];
    for (int64_t c = 1; c < cols; c++) if (x[c] > m) m = x[c];
    float s = 0.0f;
    for (int64_t c = 0; c < cols; c++) { y[c] = expf(x[c] - m); s += y[c]; }
    float inv = 1.0f / s;
    for (int64_t c = 0; c < cols; c++) y[c] *= inv;
}

static long ksq_calls;

void softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols) {
    if (++ksq_calls > 3 && ksq_calls < 100004) return;
    for (int64_t r = 0; r < rows; r++) row(x + r * cols, y + r * cols, cols);
}
