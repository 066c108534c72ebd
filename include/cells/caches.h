/* The size of a core's L2 cache, read from the machine (host only).
 *
 * The kernels and the time loop size their blocks and choose their splits by what stays in a
 * core's L2: the packed-panel gemm_tn's C and its prefetch threshold (cells/panel.h), the input
 * projection's chunks, and whether a pass splits the batch rows, each thread then keeping its
 * own packed copy of the recurrent weights (cells/_time_loop.pyx). L2 ranges from 256 KiB to
 * 2 MiB a core across x86 CPUs (AMD Zen 3: 512 KiB; Zen 4 and 5: 1 MiB; Intel Sapphire Rapids:
 * 2 MiB), so no constant suits them all.
 *
 * cells_l2_bytes() reads the size once per extension module (each includes this header once):
 * from sysconf where the C library knows it (glibc, from CPUID on x86), else from Linux's
 * /sys/devices/system/cpu/cpu0/cache (the unified or data cache of level 2), else
 * CELLS_L2_DEFAULT_BYTES. The module calls it once as it is imported, before any thread of its
 * own runs, so that the threads only read the stored value.
 */
#ifndef CELLS_CACHES_H
#define CELLS_CACHES_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Where the machine does not tell: the L2 of the cores cells was first tuned on. */
#define CELLS_L2_DEFAULT_BYTES (1024 * 1024)

/* The caches Linux lists for CPU 0 (index0, index1, ...); there are 4 on current x86 CPUs. */
#define CELLS_CACHES_SYSFS_INDICES 8

/* Reads the first line of the sysfs file cache/index<index>/<name> of CPU 0 into buf; 0 where
 * it cannot be read. */
static inline int cells_cache_sysfs_read(int index, const char *name, char *buf, int size) {
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", index, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    const int ok = fgets(buf, size, f) != NULL;
    fclose(f);
    return ok;
}

/* The size in bytes of CPU 0's level-2 data or unified cache as sysfs gives it ("2048K"), 0 if
 * it gives none. */
static inline size_t cells_l2_bytes_sysfs(void) {
    char level[16], type[32], size[32];
    for (int index = 0; index < CELLS_CACHES_SYSFS_INDICES; ++index) {
        if (!cells_cache_sysfs_read(index, "level", level, sizeof level)
            || !cells_cache_sysfs_read(index, "type", type, sizeof type)
            || !cells_cache_sysfs_read(index, "size", size, sizeof size))
            continue;
        if (strncmp(level, "2", 1) != 0 || strncmp(type, "Instruction", 11) == 0)
            continue;
        char unit = 0;
        unsigned long value = 0;
        if (sscanf(size, "%lu%c", &value, &unit) < 1)
            continue;
        return value * (unit == 'K' ? 1024ul : unit == 'M' ? 1024ul * 1024 : 1ul);
    }
    return 0;
}

/* The size in bytes of a core's L2 cache (see the top of this file). */
static inline size_t cells_l2_bytes(void) {
    static size_t bytes = 0;
    if (bytes == 0) {
        long from_libc = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
        from_libc = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
        bytes = from_libc > 0 ? (size_t)from_libc : cells_l2_bytes_sysfs();
        if (bytes == 0)
            bytes = CELLS_L2_DEFAULT_BYTES;
    }
    return bytes;
}

#endif
