/* victim: chase pointers through a working set and report the time per access, on request.
 *
 * The working set is SIZE bytes of 64-byte lines linked in one random cycle;
 * every load waits for the one before it, so an access costs the latency of
 * wherever its line is. A set that fits in this core's L2 costs the L2's
 * latency whatever other cores do; a set several times the last-level cache
 * goes to memory on nearly every access, and waits in the memory
 * controller's queues behind everyone else's requests.
 *
 * The set is allocated, touched and linked once, before the first request
 * (with transparent huge pages where the kernel allows, so that page walks
 * stay in the caches and the time is the memory's). With -i it takes
 * requests on stdin, one per line: a number of milliseconds to chase for.
 * It answers one sample line, then waits, using no CPU. End of input ends
 * it. Without -i it chases for -d MS and prints one sample.
 *
 * usage: victim -c CPU -w SIZE [-d MS] [-i]
 *   SIZE in bytes with an optional K, M or G suffix
 * examples:
 *   victim -c 1 -w 1M -d 500          # an L2-sized set on CPU 1 for 500 ms
 *   victim -c 1 -w 1G -d 500          # a set far beyond the LLC
 *   victim -c 1 -w 1G -i              # wait for requests on stdin
 */
#include "perflab_bench.h"
#include <sys/mman.h>

#define LINE 64
#define HUGE_PAGE (2u << 20)
#define CHUNK 4096 /* accesses between two looks at the clock */

struct line {
    struct line *next;
    char pad[LINE - sizeof(struct line *)];
};

// ANCHOR: cycle
/* Link the lines in one random cycle (Sattolo's shuffle): no stride for a
 * prefetcher to follow, every line visited once per lap. */
static struct line *link_random_cycle(struct line *lines, size_t count)
{
    uint32_t *order = malloc(count * sizeof *order);
    if (!order)
        perflab_die("victim: out of memory for the shuffle");
    for (size_t i = 0; i < count; i++)
        order[i] = (uint32_t)i;
    uint64_t state = 0x9E3779B97F4A7C15u; /* fixed seed: the same cycle every run */
    for (size_t i = count - 1; i > 0; i--) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        size_t j = state % i; /* j < i: one cycle through every line */
        uint32_t t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (size_t i = 0; i < count; i++)
        lines[order[i]].next = &lines[order[(i + 1) % count]];
    struct line *first = &lines[order[0]];
    free(order);
    return first;
}
// ANCHOR_END: cycle

// ANCHOR: chase
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Chase for `ms` milliseconds of wall time. The time per access is this
 * thread's CPU time per access: on a shared machine the scheduler may run
 * something else on this CPU meanwhile, and that is not the memory's time. */
static struct line *chase_for(struct line *p, long ms, uint64_t *accesses, uint64_t *wall, uint64_t *cpu)
{
    uint64_t done = 0, start = perflab_now_ns(), cpu_start = cpu_ns(), deadline = start + (uint64_t)ms * 1000000u, now;
    do {
        for (int i = 0; i < CHUNK; i += 4)
            p = p->next, p = p->next, p = p->next, p = p->next;
        done += CHUNK;
    } while ((now = perflab_now_ns()) < deadline);
    *accesses = done, *wall = now - start, *cpu = cpu_ns() - cpu_start;
    return p;
}
// ANCHOR_END: chase

static struct line *sample(struct line *p, long ms)
{
    uint64_t accesses, wall, cpu;
    p = chase_for(p, ms, &accesses, &wall, &cpu);
    printf("{\"type\":\"sample\",\"ms\":%ld,\"accesses\":%llu,\"ns_per_access\":%.3f,\"cpu_share\":%.3f}\n", ms,
           (unsigned long long)accesses, (double)cpu / accesses, (double)cpu / wall);
    fflush(stdout);
    return p;
}

int main(int argc, char **argv)
{
    int cpu = -1, interactive = 0;
    size_t size = 0;
    long ms = 1000;
    for (int opt; (opt = getopt(argc, argv, "c:w:d:i")) != -1;) {
        switch (opt) {
        case 'c': cpu = atoi(optarg); break;
        case 'w': size = perflab_parse_size(optarg); break;
        case 'd': ms = atol(optarg); break;
        case 'i': interactive = 1; break;
        default: perflab_die("usage: victim -c CPU -w SIZE [-d MS] [-i]");
        }
    }
    if (cpu < 0 || size < 2 * LINE || size > (64ull << 30) || ms < 1)
        perflab_die("victim: give the CPU with -c, a working set of 128 bytes to 64 GiB with -w, and -d of 1 ms or more");
    perflab_pin_self(cpu);

    size_t count = size / LINE, bytes = (count * LINE + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    struct line *lines = aligned_alloc(HUGE_PAGE, bytes);
    if (!lines)
        perflab_die("victim: cannot allocate %zu MiB: give a smaller -w or free some memory", bytes >> 20);
    madvise(lines, bytes, MADV_HUGEPAGE); /* best effort: without THP, page walks add to the time */
    memset(lines, 0, bytes);
    struct line *p = link_random_cycle(lines, count);
    perflab_print_meta("victim");
    printf("{\"type\":\"params\",\"cpu\":%d,\"working_set\":%zu,\"pid\":%d}\n", cpu, count * LINE, (int)getpid());
    fflush(stdout);

    if (!interactive) {
        p = sample(p, ms);
        return 0;
    }
    char text[64];
    while (fgets(text, sizeof text, stdin)) {
        long asked = atol(text);
        if (asked < 1 || asked > 60000)
            perflab_die("victim: asked to chase for %s ms: give 1 to 60000", text);
        p = sample(p, asked);
    }
    printf("{\"type\":\"end\",\"last\":%zu}\n", (size_t)(p - lines)); /* the chase cannot be dropped */
    return 0;
}
