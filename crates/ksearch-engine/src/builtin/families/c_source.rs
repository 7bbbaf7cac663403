//! C shared by the families' renderings: the header comment naming the point, the vector type
//! and its helpers, streaming stores.

use super::Point;

/// The C header comment listing the family and its point.
pub(crate) fn header(family: &str, point: &Point, summary: &str) -> String {
    let knobs: Vec<String> = point.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "/* Builtin template family `{family}`: {summary}\n * config: {}\n */\n",
        knobs.join(" ")
    )
}

/// C preamble shared by the families: includes, the vector type `V` of `lanes` floats (plain
/// `float` when `lanes` is 1), and unaligned load/store helpers `vld`/`vst` plus `vsplat`.
pub(crate) fn c_vector_preamble(lanes: i64) -> String {
    let mut s = String::from(
        "#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n#include <math.h>\n",
    );
    if lanes <= 1 {
        s.push_str(
            "\ntypedef float V;\n\
             #define VW 1\n\
             static inline V vld(const float *p) { return *p; }\n\
             static inline void vst(float *p, V v) { *p = v; }\n\
             static inline V vsplat(float x) { return x; }\n",
        );
    } else {
        let bytes = lanes * 4;
        s.push_str(&format!(
            "\n/* GCC vector extensions: {lanes} floats per vector. */\n\
             typedef float V __attribute__((vector_size({bytes})));\n\
             typedef int32_t VI __attribute__((vector_size({bytes})));\n\
             #define VW {lanes}\n\
             static inline V vld(const float *p) {{ V v; memcpy(&v, p, sizeof v); return v; }}\n\
             static inline void vst(float *p, V v) {{ memcpy(p, &v, sizeof v); }}\n\
             static inline V vsplat(float x) {{ return (V){{0}} + x; }}\n"
        ));
    }
    s
}

/// C helper `vstream(float *p, V v)`: a non-temporal store of one vector to an address aligned
/// to the vector's size, with intrinsics where the target has them and a plain store otherwise;
/// and `vstream_fence()` to order the streaming stores before returning.
pub(crate) fn c_stream_helpers(lanes: i64) -> String {
    let body = match lanes {
        16 => {
            "#if defined(__AVX512F__)\n    _mm512_stream_ps(p, (__m512)v);\n\
             #elif defined(__AVX__)\n    __m256 lo, hi; memcpy(&lo, &v, 32); memcpy(&hi, (const char *)&v + 32, 32);\n    _mm256_stream_ps(p, lo); _mm256_stream_ps(p + 8, hi);\n\
             #else\n    memcpy(p, &v, sizeof v);\n#endif\n"
        }
        8 => {
            "#if defined(__AVX__)\n    _mm256_stream_ps(p, (__m256)v);\n\
             #else\n    memcpy(p, &v, sizeof v);\n#endif\n"
        }
        4 => {
            "#if defined(__SSE__)\n    _mm_stream_ps(p, (__m128)v);\n\
             #else\n    memcpy(p, &v, sizeof v);\n#endif\n"
        }
        _ => "    memcpy(p, &v, sizeof v);\n",
    };
    format!(
        "\n#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#endif\n\
         /* Non-temporal store of one vector; p is aligned to sizeof(V). */\n\
         static inline void vstream(float *p, V v) {{\n{body}}}\n\
         static inline void vstream_fence(void) {{\n\
         #if defined(__SSE__)\n    _mm_sfence();\n#endif\n}}\n"
    )
}
