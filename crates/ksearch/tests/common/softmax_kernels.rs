//! C softmax kernels for tests, shared by the test binaries (`#[path]`-included).
#![allow(dead_code)] // each test binary uses its own subset

pub(crate) const HEADER: &str = "#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n";

/// A correct softmax of one row.
pub(crate) const ROW: &str = r#"
static void row(const float *x, float *y, int64_t cols) {
    float m = x[0];
    for (int64_t c = 1; c < cols; c++) if (x[c] > m) m = x[c];
    float s = 0.0f;
    for (int64_t c = 0; c < cols; c++) { y[c] = expf(x[c] - m); s += y[c]; }
    float inv = 1.0f / s;
    for (int64_t c = 0; c < cols; c++) y[c] *= inv;
}
"#;

/// Every row, once.
pub(crate) const ALL_ROWS: &str =
    "for (int64_t r = 0; r < rows; r++) row(x + r * cols, y + r * cols, cols);";

/// A complete candidate whose function body is `body` (it may use `row`).
pub(crate) fn softmax_candidate(body: &str) -> String {
    format!(
        "{HEADER}{ROW}\nvoid softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols) {{\n{body}\n}}\n"
    )
}

pub(crate) fn good() -> String {
    softmax_candidate(ALL_ROWS)
}

pub(crate) fn twice_as_slow() -> String {
    softmax_candidate(&format!("{ALL_ROWS}\n{ALL_ROWS}"))
}

pub(crate) fn broken() -> String {
    softmax_candidate(&format!("{ALL_ROWS}\nint oops = ;"))
}
