/* victim: keep touching a small, L1-resident working set and report how
 * long each access takes, over time.
 *
 * The working set is WORKING_SET bytes of 64-byte lines linked in one random
 * cycle; the victim chases the pointers, so every load waits for the one
 * before it and an access costs exactly the latency of wherever the line is.
 * Alone, every line stays in this core's L1 and an access takes the L1's
 * latency (4-5 cycles). If something evicts the lines (an inclusive LLC
 * back-invalidating them while another core streams), the next access to
 * each one waits for memory instead, and the average rises.
 *
 * One JSON line per sample: the time since the start and the mean ns per
 * access over ACCESSES accesses. The first sample warms the L1 and is marked
 * "warmup". Overhead: one busy CPU for DURATION ms.
 *
 * usage: victim -c CPU [-w WORKING_SET] [-n ACCESSES] [-d DURATION_MS]
 *   WORKING_SET in bytes, with an optional K, M or G suffix (default 16K)
 * examples:
 *   victim -c 1                    # 16 KiB on CPU 1 for 1000 ms
 *   victim -c 3 -w 32K -d 5000     # the seed's 32 KiB on core 3 for 5 s
 */
#include "perflab_bench.h"
#include <unistd.h>

#define LINE 64

struct line {
    struct line *next;
    char pad[LINE - sizeof(struct line *)];
};

// ANCHOR: cycle
/* Link the lines in one random cycle (Sattolo's shuffle): no stride for a
 * prefetcher to follow, and every line is visited once per lap. */
static struct line *link_random_cycle(struct line *lines, size_t count)
{
    size_t *order = malloc(count * sizeof *order);
    if (!order)
        perflab_die("out of memory");
    for (size_t i = 0; i < count; i++)
        order[i] = i;
    uint64_t state = 0x9E3779B97F4A7C15u; /* fixed seed: the same cycle every run */
    for (size_t i = count - 1; i > 0; i--) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        size_t j = state % i; /* j < i: one cycle through every line */
        size_t t = order[i];
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
static struct line *chase(struct line *p, uint64_t accesses)
{
    for (uint64_t i = 0; i < accesses; i += 8) {
        p = p->next, p = p->next, p = p->next, p = p->next;
        p = p->next, p = p->next, p = p->next, p = p->next;
    }
    return p;
}
// ANCHOR_END: chase

int main(int argc, char **argv)
{
    int cpu = -1;
    size_t working_set = 16 << 10;
    uint64_t accesses = 1 << 20;
    long duration_ms = 1000;
    for (int opt; (opt = getopt(argc, argv, "c:w:n:d:")) != -1;) {
        switch (opt) {
        case 'c': cpu = atoi(optarg); break;
        case 'w': working_set = perflab_parse_size(optarg); break;
        case 'n': accesses = strtoull(optarg, NULL, 10); break;
        case 'd': duration_ms = atol(optarg); break;
        default: perflab_die("usage: victim -c CPU [-w WORKING_SET] [-n ACCESSES] [-d DURATION_MS]");
        }
    }
    if (cpu < 0)
        perflab_die("victim: give the CPU to run on with -c (see `perflab probe` for the online CPUs)");
    if (working_set < 2 * LINE || working_set > (1u << 30))
        perflab_die("victim: working set %zu bytes: give 128 bytes to 1 GiB", working_set);
    if (accesses < 8 || accesses % 8 || duration_ms < 1)
        perflab_die("victim: -n needs a multiple of 8 accesses and -d at least 1 ms");
    perflab_pin_self(cpu);

    size_t count = working_set / LINE;
    struct line *lines = aligned_alloc(4096, count * sizeof *lines);
    if (!lines)
        perflab_die("victim: cannot allocate %zu bytes", working_set);
    memset(lines, 0, count * sizeof *lines);
    struct line *p = link_random_cycle(lines, count);

    perflab_print_meta("victim");
    printf("{\"type\":\"params\",\"cpu\":%d,\"working_set\":%zu,\"accesses\":%llu}\n",
           cpu, count * LINE, (unsigned long long)accesses);
    uint64_t start = perflab_now_ns(), deadline = start + (uint64_t)duration_ms * 1000000u;
    for (int sample = 0;; sample++) {
        uint64_t t0 = perflab_now_ns();
        p = chase(p, accesses);
        uint64_t t1 = perflab_now_ns();
        printf("{\"type\":\"sample\",\"t_ms\":%.3f,\"ns_per_access\":%.4f%s}\n", (t1 - start) / 1e6,
               (double)(t1 - t0) / accesses, sample == 0 ? ",\"warmup\":true" : "");
        if (t1 >= deadline && sample > 0) /* one timed sample at least, however late a busy CPU ended the warm-up */
            break;
    }
    /* Print where the chase ended so the compiler cannot drop it. */
    printf("{\"type\":\"end\",\"last\":%zu}\n", (size_t)(p - lines));
    return 0;
}
