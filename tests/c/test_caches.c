/* Prints what include/cells/caches.h reads, one "name bytes" a line: "libc" (sysconf's L2 size,
 * -1 where the C library does not know it), "sysfs" (the header's sysfs reader alone, 0 where
 * /sys does not list the cache) and "l2" (cells_l2_bytes, the value the kernels use).
 * tests/test_caches.py checks them against its own reading of sysfs.
 *
 *   gcc -O3 -I include tests/c/test_caches.c -o test_caches && ./test_caches
 */
#include <stdio.h>

#include "cells/caches.h"

int main(void) {
    long libc = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
    libc = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    printf("libc %ld\nsysfs %zu\nl2 %zu\n", libc, cells_l2_bytes_sysfs(), cells_l2_bytes());
    return 0;
}
