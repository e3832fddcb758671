/* flows: a flow table's expiry pass, written the O(n^2) way and fixed.
 *
 * Every flow last seen before the cutoff expires. The pass marks them in a
 * bitstring, then frees them by walking the bitstring. The quadratic version
 * asks for the first set bit from the start of the whole set for each flow it
 * frees, as the FreeBSD flow table's cleaning path did with ffs(); the fixed
 * version goes on from where the last one was found. Both free the same flows.
 *
 * One process visits every (version, n) once, in an order rotated by -r, and
 * prints one JSON line per visit: nanoseconds per expiry pass. -t 2000000000
 * repeats each visit for two seconds, for a profiler to watch.
 *
 * usage: flows [-n SIZES] [-v quadratic,fixed] [-t MIN_NS] [-r ROTATION] [-C CPU]
 */
#include "perflab_bench.h"

#define MAX_SIZES 16
#define WORD_BITS 64
#define MIN_PASSES 3
#define MAX_PASSES 100000

struct flow {
    uint32_t src, dst;
    uint16_t sport, dport, in_use;
    uint64_t last_seen, packets;
};

struct table {
    long n;
    struct flow *flows;
    uint64_t *expired; /* the bitstring: bit i set = flow i is to be freed */
};

/* The first set bit at or after `start`, or -1: FreeBSD's bit_ffs_at(). */
__attribute__((noinline)) long bit_ffs_at(const uint64_t *bits, long start, long nbits)
{
    for (long word = start / WORD_BITS; word * WORD_BITS < nbits; word++) {
        uint64_t set = bits[word];
        if (word == start / WORD_BITS)
            set &= ~0ull << (start % WORD_BITS);
        if (set) {
            long bit = word * WORD_BITS + __builtin_ctzll(set);
            return bit < nbits ? bit : -1;
        }
    }
    return -1;
}

__attribute__((noinline)) void free_flow(struct table *t, long i)
{
    t->flows[i].in_use = 0;
    t->flows[i].packets = 0;
    t->expired[i / WORD_BITS] &= ~(1ull << (i % WORD_BITS));
}

__attribute__((noinline)) long mark_expired(struct table *t, uint64_t cutoff)
{
    long marked = 0;
    memset(t->expired, 0, (t->n + WORD_BITS - 1) / WORD_BITS * sizeof *t->expired);
    for (long i = 0; i < t->n; i++)
        if (t->flows[i].in_use && t->flows[i].last_seen < cutoff) {
            t->expired[i / WORD_BITS] |= 1ull << (i % WORD_BITS);
            marked++;
        }
    return marked;
}

// ANCHOR: quadratic
__attribute__((noinline)) long expire_quadratic(struct table *t, uint64_t cutoff)
{
    long freed = 0;
    mark_expired(t, cutoff);
    for (long i = bit_ffs_at(t->expired, 0, t->n); i >= 0; i = bit_ffs_at(t->expired, 0, t->n)) {
        free_flow(t, i); /* each search starts again at bit 0, past every flow already freed */
        freed++;
    }
    return freed;
}
// ANCHOR_END: quadratic

// ANCHOR: fixed
__attribute__((noinline)) long expire_fixed(struct table *t, uint64_t cutoff)
{
    long freed = 0;
    mark_expired(t, cutoff);
    for (long i = bit_ffs_at(t->expired, 0, t->n); i >= 0; i = bit_ffs_at(t->expired, i + 1, t->n)) {
        free_flow(t, i); /* each search goes on from the flow just freed */
        freed++;
    }
    return freed;
}
// ANCHOR_END: fixed

static uint64_t xorshift(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* Every flow in use, last seen at a random time in [0, 1000): those before 500 expire, about half. */
static void fill(struct table *t, uint64_t seed)
{
    for (long i = 0; i < t->n; i++) {
        uint64_t r = xorshift(&seed);
        t->flows[i] = (struct flow){(uint32_t)r, (uint32_t)(r >> 32), (uint16_t)r, (uint16_t)(r >> 16), 1,
                                    r % 1000, 1 + r % 64};
    }
}

static int parse_sizes(char *text, long *sizes)
{
    int count = 0;
    for (char *item = strtok(text, ","); item; item = strtok(NULL, ",")) {
        char *end;
        long value = strtol(item, &end, 10);
        if (*end || value < 1 || value > (1L << 24) || count == MAX_SIZES)
            perflab_die("bad size '%s': give up to %d flow counts from 1 to %ld, comma-separated", item, MAX_SIZES,
                        1L << 24);
        sizes[count++] = value;
    }
    return count;
}

int main(int argc, char **argv)
{
    char default_sizes[] = "1024,4096,16384,65536", default_versions[] = "quadratic,fixed";
    char *sizes_text = default_sizes, *versions_text = default_versions;
    long sizes[MAX_SIZES], min_ns = 2000000, rotation = 0, cpu = -1;
    int opt;
    while ((opt = getopt(argc, argv, "n:v:t:r:C:")) != -1) {
        switch (opt) {
        case 'n': sizes_text = optarg; break;
        case 'v': versions_text = optarg; break;
        case 't': min_ns = atol(optarg); break;
        case 'r': rotation = atol(optarg); break;
        case 'C': cpu = atol(optarg); break;
        default: perflab_die("usage: flows [-n SIZES] [-v quadratic,fixed] [-t MIN_NS] [-r ROTATION] [-C CPU]");
        }
    }
    if (min_ns < 1 || rotation < 0)
        perflab_die("-t must be positive and -r not negative");
    int n_sizes = parse_sizes(sizes_text, sizes), n_versions = 0;
    long (*versions[2])(struct table *, uint64_t);
    const char *names[2];
    for (char *item = strtok(versions_text, ","); item; item = strtok(NULL, ",")) {
        if (n_versions == 2 || (strcmp(item, "quadratic") && strcmp(item, "fixed")))
            perflab_die("bad version '%s': choose from quadratic,fixed", item);
        names[n_versions] = strcmp(item, "fixed") ? "quadratic" : "fixed";
        versions[n_versions++] = strcmp(item, "fixed") ? expire_quadratic : expire_fixed;
    }
    if (cpu >= 0)
        perflab_pin_self((int)cpu);
    perflab_print_meta("flows");

    static double pass_ns[MAX_PASSES];
    int visits = n_sizes * n_versions;
    for (int v = 0; v < visits; v++) {
        int visit = (int)((v + rotation) % visits);
        struct table t = {sizes[visit / n_versions], NULL, NULL};
        t.flows = malloc(t.n * sizeof *t.flows);
        t.expired = calloc((t.n + WORD_BITS - 1) / WORD_BITS, sizeof *t.expired);
        if (!t.flows || !t.expired)
            perflab_die("out of memory for %ld flows", t.n);
        long (*expire)(struct table *, uint64_t) = versions[visit % n_versions];
        fill(&t, 42);
        long freed = expire(&t, 500); /* warm-up, on the same table in every version: they free as many */
        long passes = 0;
        uint64_t elapsed = 0;
        while ((elapsed < (uint64_t)min_ns || passes < MIN_PASSES) && passes < MAX_PASSES) {
            fill(&t, 43 + passes); /* untimed: a fresh table, so no branch predictor learns which flows expire */
            uint64_t start = perflab_now_ns();
            expire(&t, 500);
            pass_ns[passes] = (double)(perflab_now_ns() - start);
            elapsed += (uint64_t)pass_ns[passes++];
        }
        /* The median pass: one the scheduler interrupted is an outlier, not part of the mean. */
        printf("{\"type\":\"sample\",\"version\":\"%s\",\"n\":%ld,\"passes\":%ld,\"freed\":%ld,\"ns_per_pass\":%.1f}\n",
               names[visit % n_versions], t.n, passes, freed, perflab_median(pass_ns, passes));
        free(t.flows);
        free(t.expired);
    }
    return 0;
}
