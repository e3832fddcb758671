/* alias_sweep: one store->load loop, its two arrays a chosen distance apart modulo 4 KiB.
 *
 * The loop is copy-scale, dst[i] = k * src[i], over 1024 doubles (8 KiB per
 * array: both stay in L1). A load is checked against the older stores still
 * in the store buffer by the low 12 bits of their addresses first; when
 * those match but the addresses do not (they differ by a multiple of 4 KiB),
 * some cores hold the load back as if it depended on the store. That
 * happens here when dst is a few stores ahead of src modulo 4096: the load
 * of src[i] then meets the store to dst[i - k] for a small k.
 *
 * src starts on a page; dst starts DISTANCE bytes (mod 4096) past a later
 * page, so the arrays never overlap, whatever the distance.
 *   -k scalar   one 8-byte load and store per element
 *   -k vector   AVX: 32 bytes per load and store
 * A distance must be a multiple of the access (8 or 32 bytes), so that no
 * access splits a cache line: a split costs more than aliasing does.
 *
 * Each visit runs the loop once untimed, then times BLOCKS blocks of
 * REPEATS passes and prints the fastest block: an interruption only ever
 * adds time. Distances are visited round-robin; -r rotates the order, so
 * drift hits every distance alike. Overhead: one busy CPU.
 *
 * usage: alias_sweep [-k scalar|vector] [-d DISTANCES] [-n REPEATS] [-s ROUNDS] [-r ROTATION] [-C CPU]
 *   DISTANCES: comma-separated bytes, each -2048..2047 (default -64,64)
 */
#include "perflab_bench.h"
#include <unistd.h>

#define PAGE_BYTES 4096

#define ELEMENTS 1024
#define MAX_DISTANCES 512
#define BLOCKS 5
typedef double v4d __attribute__((vector_size(32)));

// ANCHOR: loops
__attribute__((noinline, optimize("no-tree-vectorize")))
static void copy_scale_scalar(double *dst, const double *src)
{
    for (int i = 0; i < ELEMENTS; i++)
        dst[i] = 1.000001 * src[i];
}

__attribute__((noinline, target("avx")))
static void copy_scale_vector(double *dst, const double *src)
{
    v4d *to = (v4d *)dst;
    const v4d *from = (const v4d *)src;
    for (int i = 0; i < ELEMENTS / 4; i++)
        to[i] = 1.000001 * from[i];
}
// ANCHOR_END: loops

/* Parse "-64,0,64" into distances[]; each a multiple of `width`; return how many. */
static int parse_distances(const char *list, int width, long *distances)
{
    int count = 0;
    for (const char *p = list; *p;) {
        char *end;
        long d = strtol(p, &end, 10);
        if (end == p || (*end && *end != ','))
            perflab_die("bad distance list '%s': give bytes separated by commas, like -64,0,64", list);
        if (d < -2048 || d > 2047 || d % width)
            perflab_die("distance %ld: each must be -2048..2047 and a multiple of %d bytes", d, width);
        if (count == MAX_DISTANCES)
            perflab_die("at most %d distances per run", MAX_DISTANCES);
        distances[count++] = d;
        p = *end ? end + 1 : end;
    }
    if (count == 0)
        perflab_die("no distances given: use a list like -64,0,64");
    return count;
}

int main(int argc, char **argv)
{
    const char *kernel = "scalar", *list = "-64,64";
    long repeats = 200, rounds = 1, rotation = 0;
    int cpu = -1, opt;
    opterr = 0; /* our one-line usage instead of getopt's own message */
    while ((opt = getopt(argc, argv, "k:d:n:s:r:C:")) != -1) {
        switch (opt) {
        case 'k': kernel = optarg; break;
        case 'd': list = optarg; break;
        case 'n': repeats = atol(optarg); break;
        case 's': rounds = atol(optarg); break;
        case 'r': rotation = atol(optarg); break;
        case 'C': cpu = atoi(optarg); break;
        default:
            perflab_die("usage: alias_sweep [-k scalar|vector] [-d DISTANCES] [-n REPEATS] [-s ROUNDS] [-r ROTATION] [-C CPU]");
        }
    }
    int vector = strcmp(kernel, "vector") == 0;
    if (!vector && strcmp(kernel, "scalar") != 0)
        perflab_die("unknown kernel '%s': choose scalar or vector", kernel);
    if (vector && !__builtin_cpu_supports("avx"))
        perflab_die("this CPU has no AVX, which the vector loop needs: use -k scalar");
    if (repeats < 1 || rounds < 1)
        perflab_die("need at least 1 repeat and 1 round, got -n %ld -s %ld", repeats, rounds);
    int width = vector ? 32 : 8;
    long distances[MAX_DISTANCES];
    int count = parse_distances(list, width, distances);
    if (cpu >= 0)
        perflab_pin_self(cpu);

    /* src on page 0, dst on page 2 plus the distance: 8 KiB of src, never touching dst */
    char *base = aligned_alloc(PAGE_BYTES, 5 * PAGE_BYTES);
    if (!base)
        perflab_die("cannot allocate 20 KiB");
    double *src = (double *)base;
    for (int i = 0; i < ELEMENTS; i++)
        src[i] = i;
    perflab_print_meta("alias_sweep");
    for (long r = 0; r < rounds; r++) {
        for (int v = 0; v < count; v++) {
            long distance = distances[(v + (r + rotation) * 7) % count]; /* a different order each round */
            double *dst = (double *)(base + 2 * PAGE_BYTES + (distance + PAGE_BYTES) % PAGE_BYTES);
            vector ? copy_scale_vector(dst, src) : copy_scale_scalar(dst, src); /* untimed warm-up */
            uint64_t elapsed = UINT64_MAX;
            for (int b = 0; b < BLOCKS; b++) {
                uint64_t start = perflab_now_ns();
                for (long n = 0; n < repeats; n++)
                    vector ? copy_scale_vector(dst, src) : copy_scale_scalar(dst, src);
                uint64_t took = perflab_now_ns() - start;
                elapsed = took < elapsed ? took : elapsed;
            }
            printf("{\"type\":\"sample\",\"kernel\":\"%s\",\"width\":%d,\"distance\":%ld,\"elements\":%d,"
                   "\"repeats\":%ld,\"fastest_block_ns\":%llu,\"ns_per_element\":%.5f}\n",
                   kernel, width, distance, ELEMENTS, repeats, (unsigned long long)elapsed,
                   (double)elapsed / ((double)repeats * ELEMENTS));
        }
    }
    free(base);
    return 0;
}
