/*
{comment}
 */
#ifndef {guard}
#define {guard}

#include <stdint.h>

#ifdef __cplusplus
#define {guard}_RESTRICT_DEFINED
#define restrict __restrict
extern "C" {
#endif

{signature};

#ifdef __cplusplus
}
#endif
#ifdef {guard}_RESTRICT_DEFINED
#undef restrict
#undef {guard}_RESTRICT_DEFINED
#endif

#endif /* {guard} */
