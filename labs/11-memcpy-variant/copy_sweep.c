/* copy_sweep: nanoseconds per memcpy call, for each size from 1 byte to 1 MiB.
 *
 * memcpy is called through the PLT, as any program calls it, so it runs the
 * variant glibc's IFUNC resolver picked when the program loaded; run it under
 * GLIBC_TUNABLES to make glibc pick another. The size is read through a
 * volatile, so the compiler cannot inline the copy as a few moves.
 *
 * Each size copies between two buffers 2 MiB + SHIFT apart, in one allocation
 * touched first: SHIFT keeps the destination off the source's offset in its
 * page, so that no load can be held behind the last copy's stores by 4 KiB
 * aliasing (lab 8) on a core that has it. A block copies 1 MiB in all, in
 * at most 20,000 calls: tens of microseconds at every size, long next to
 * clock_gettime's ~20 ns and short enough that most blocks see no
 * interruption. A size is timed in BLOCKS blocks and the fastest is
 * printed: an interruption only ever adds time. Overhead: one busy CPU.
 *
 * First line: which memcpy this process got, as an offset into libc (dladdr
 * on the address the resolver returned), for the lab to name from glibc's
 * debug symbols where bpftrace cannot count.
 *
 * usage: copy_sweep [-s SIZES] [-b BLOCKS] [-C CPU]
 *   SIZES: comma-separated bytes, 1..1M, K and M suffixes (default 1,2,4,...,1M)
 */
#include "perflab_bench.h"
#include <dlfcn.h>

#define MAX_SIZES 64
#define SPAN (2u << 20)
#define BLOCK_BYTES (1u << 20)
#define MAX_COPIES 20000
#define SHIFT 1088  /* 1 KiB and a cache line: not a multiple of 4 KiB, not inside one line */

// ANCHOR: timing
/* The size is volatile so each call goes to memcpy with a size known only at run time. */
static double ns_per_copy(char *to, const char *from, size_t size, int blocks)
{
    volatile size_t length = size;
    long copies = BLOCK_BYTES / size < MAX_COPIES ? (long)(BLOCK_BYTES / size) : MAX_COPIES;
    double best = 0;
    for (int b = 0; b <= blocks; b++) {  // block 0 warms the caches and the branch predictors, untimed
        uint64_t start = perflab_now_ns();
        for (long i = 0; i < copies; i++) {
            memcpy(to, from, length);
            __asm__ volatile("" ::: "memory");  // the compiler may neither drop nor merge the copies
        }
        double ns = (double)(perflab_now_ns() - start) / copies;
        if (b > 0 && (b == 1 || ns < best))
            best = ns;
    }
    return best;
}
// ANCHOR_END: timing

static int parse_sizes(char *list, size_t *sizes)
{
    int count = 0;
    for (char *item = strtok(list, ","); item; item = strtok(NULL, ",")) {
        if (count == MAX_SIZES)
            perflab_die("too many sizes: at most %d", MAX_SIZES);
        sizes[count] = perflab_parse_size(item);
        if (sizes[count] < 1 || sizes[count] > SPAN / 2)
            perflab_die("bad size %s: give 1 byte to 1M", item);
        count++;
    }
    return count;
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES];
    int count = 0, blocks = 5, cpu = -1, opt;
    while ((opt = getopt(argc, argv, "s:b:C:")) != -1) {
        if (opt == 's')
            count = parse_sizes(optarg, sizes);
        else if (opt == 'b' && (blocks = atoi(optarg)) >= 1)
            continue;
        else if (opt == 'C')
            cpu = atoi(optarg);
        else
            perflab_die("usage: copy_sweep [-s SIZES] [-b BLOCKS >= 1] [-C CPU]");
    }
    if (count == 0)
        for (size_t s = 1; s <= SPAN / 2; s *= 2)
            sizes[count++] = s;
    if (cpu >= 0)
        perflab_pin_self(cpu);

    Dl_info found;
    void *(*resolved)(void *, const void *, size_t) = memcpy;  // through the GOT: the resolver's choice
    if (!dladdr((void *)resolved, &found))
        perflab_die("dladdr cannot place memcpy at %p", (void *)resolved);
    char *buffer = malloc(2 * SPAN + SHIFT);
    if (!buffer)
        perflab_die("cannot allocate %u bytes", 2 * SPAN + SHIFT);
    memset(buffer, 1, 2 * SPAN + SHIFT);

    perflab_print_meta("copy_sweep");
    printf("{\"type\":\"memcpy\",\"library\":\"%s\",\"offset\":%lu}\n", found.dli_fname,
           (unsigned long)((char *)resolved - (char *)found.dli_fbase));
    for (int i = 0; i < count; i++)
        printf("{\"type\":\"sample\",\"size\":%zu,\"ns_per_copy\":%.4f}\n", sizes[i],
               ns_per_copy(buffer + SPAN + SHIFT, buffer, sizes[i], blocks));
    return 0;
}
