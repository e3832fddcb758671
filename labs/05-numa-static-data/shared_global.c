/* shared_global: threads doing private work, and one global in .bss that every thread touches.
 *
 * USAGE: shared_global -c CPUS -a ARM [-k K] [-n OPS] [-r REPEATS] [-m NODE]
 *   -c CPUS     one thread per CPU, pinned: "0,1" (two or more CPUs)
 *   -a ARM      what every thread does with the global every K operations; like tree code
 *               meeting its empty-tree sentinel, every touch reads it first:
 *                 none     nothing (private work only)
 *                 read     read it
 *                 write    read it, then write it unconditionally (the bug: the value never changes)
 *                 check    read it, and write only if the value would change (the fix)
 *                 padded   read and write the thread's own slot, one cache line each (no sharing)
 *   -k K        operations between two touches of the global (default 1)
 *   -n OPS      operations per thread per repeat (default 2000000)
 *   -r REPEATS  timed repeats, each printed as one sample (default 5)
 *   -m NODE     first move the global's page to NUMA node NODE (mbind, MPOL_MF_MOVE)
 *
 * EXAMPLES
 *   shared_global -c 0,1 -a write         two threads write one line: it ping-pongs
 *   shared_global -c 0,1 -a check -k 4    the fix, one touch every 4 operations
 *   taskset -c 2 shared_global -c 2,3 -a none -n 1000   where did first touch put .bss?
 *
 * Prints a meta line, a placement line (the global's address and the NUMA node of its page,
 * from move_pages(2)), then one sample per repeat: ns per operation of the slowest thread.
 */
#include "perflab_bench.h"
#include <sys/syscall.h>

#define MAX_THREADS 256
#define MPOL_BIND 2
#define MPOL_MF_MOVE (1 << 1)

/* The global every thread shares: its own cache line of .bss, and a name that `nm` shows.
 * Like ScyllaDB's nil_root, an empty tree's sentinel: its value never changes. */
struct line {
    volatile uint64_t value;
} __attribute__((aligned(PERFLAB_LINE)));

struct line shared_sentinel __attribute__((used));
static struct line private_slots[MAX_THREADS]; /* the padded arm: one line per thread */

enum arm { NONE, READ, WRITE, CHECK, PADDED };
static const char *const ARMS[] = {"none", "read", "write", "check", "padded"};

struct thread {
    pthread_t id;
    int index, cpu;
    uint64_t elapsed_ns, checksum;
};

static enum arm chosen_arm;
static long every_k = 1, ops = 2000000;
static pthread_barrier_t start_line;

/* Always 0, but the compiler cannot know: adding (x & dependency_mask) to the global's address makes each
 * touch wait for the private work before it, as a tree walk's next load waits for the node before it.
 * Without it, out-of-order execution would issue the load early and hide the cache miss. */
volatile uint64_t dependency_mask;

/* The private work of one operation: a few dependent multiply-xorshift steps, some 20 ns. */
static inline uint64_t private_work(uint64_t x)
{
    for (int i = 0; i < 8; i++) {
        x ^= x >> 29;
        x *= 0xbf58476d1ce4e5b9u;
    }
    return x;
}

static void *worker(void *arg)
{
    struct thread *self = arg;
    perflab_pin_self(self->cpu);
    uint64_t x = self->index + 1;
    const uint64_t mask = dependency_mask;
    pthread_barrier_wait(&start_line);
    uint64_t start = perflab_now_ns();
    for (long op = 0, until_touch = every_k; op < ops; op++) {
        x = private_work(x);
        if (--until_touch)
            continue;
        until_touch = every_k;
        /* ANCHOR: touch */
        volatile uint64_t *shared = (volatile uint64_t *)((uintptr_t)&shared_sentinel.value + (x & mask));
        volatile uint64_t *slot = (volatile uint64_t *)((uintptr_t)&private_slots[self->index].value + (x & mask));
        switch (chosen_arm) {
        case NONE: break;
        case READ: x ^= *shared; break;
        case WRITE:
            x ^= *shared;
            *shared = 0;
            break;
        case CHECK:
            x ^= *shared;
            if (*shared != 0)
                *shared = 0;
            break;
        case PADDED:
            x ^= *slot;
            *slot = 0;
            break;
        }
        /* ANCHOR_END: touch */
    }
    self->elapsed_ns = perflab_now_ns() - start;
    self->checksum = x;
    return NULL;
}

/* The NUMA node of the page at `address` (move_pages with no target nodes only reports), or -errno. */
static int node_of(void *address)
{
    void *page = (void *)((uintptr_t)address & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1));
    int status = -1;
    if (syscall(SYS_move_pages, 0, 1UL, &page, NULL, &status, 0) != 0)
        return -errno;
    return status;
}

static void move_to_node(void *address, int node)
{
    long page_size = sysconf(_SC_PAGESIZE);
    void *page = (void *)((uintptr_t)address & ~(uintptr_t)(page_size - 1));
    unsigned long mask[16] = {0};
    if (node < 0 || node >= (int)(8 * sizeof mask))
        perflab_die("-m %d: no such NUMA node (see `numactl -H`)", node);
    mask[node / 64] = 1UL << (node % 64);
    if (syscall(SYS_mbind, page, page_size, MPOL_BIND, mask, 8 * sizeof mask, MPOL_MF_MOVE) != 0)
        perflab_die("cannot move the global's page to node %d: %s (is the node online? `numactl -H`)", node,
                    strerror(errno));
}

static int parse_cpus(const char *text, struct thread *threads)
{
    int count = 0;
    for (const char *p = text; *p;) {
        char *end;
        long cpu = strtol(p, &end, 10);
        if (end == p || cpu < 0 || (*end && *end != ','))
            perflab_die("bad CPU list %s: give CPU numbers separated by commas, e.g. 0,1", text);
        if (count == MAX_THREADS)
            perflab_die("too many CPUs in %s: at most %d", text, MAX_THREADS);
        threads[count].index = count;
        threads[count].cpu = (int)cpu;
        count++;
        p = *end ? end + 1 : end;
    }
    return count;
}

static long parse_number(const char *text, const char *what, long least)
{
    char *end;
    long value = strtol(text, &end, 10);
    if (end == text || *end || value < least)
        perflab_die("bad %s %s: give a whole number of at least %ld", what, text, least);
    return value;
}

int main(int argc, char **argv)
{
    static struct thread threads[MAX_THREADS];
    int count = 0, repeats = 5, opt, move = -1, arm_given = 0;
    while ((opt = getopt(argc, argv, "c:a:k:n:r:m:")) != -1) {
        switch (opt) {
        case 'c': count = parse_cpus(optarg, threads); break;
        case 'a':
            for (int a = NONE; a <= PADDED; a++)
                if (strcmp(optarg, ARMS[a]) == 0)
                    chosen_arm = a, arm_given = 1;
            if (!arm_given)
                perflab_die("unknown arm %s: give none, read, write, check or padded", optarg);
            break;
        case 'k': every_k = parse_number(optarg, "-k (operations between touches)", 1); break;
        case 'n': ops = parse_number(optarg, "-n (operations per thread)", 1); break;
        case 'r': repeats = (int)parse_number(optarg, "-r (repeats)", 1); break;
        case 'm': move = (int)parse_number(optarg, "-m (NUMA node)", 0); break;
        default: perflab_die("usage: %s -c CPUS -a none|read|write|check|padded [-k K] [-n OPS] [-r REPEATS] [-m NODE]", argv[0]);
        }
    }
    if (count < 2 || !arm_given)
        perflab_die("give -a ARM and at least two CPUs with -c (e.g. -c 0,1): one thread has no one to share with");
    perflab_print_meta("shared_global");

    shared_sentinel.value = 0; /* the first touch: it decides the page's node, unless a policy does */
    int first_node = node_of((void *)&shared_sentinel);
    if (move >= 0)
        move_to_node((void *)&shared_sentinel, move);
    printf("{\"type\":\"placement\",\"symbol\":\"shared_sentinel\",\"address\":\"%p\",\"first_touch_cpu\":%d,"
           "\"node_after_first_touch\":%d,\"moved_to\":%d,\"node\":%d}\n",
           (void *)&shared_sentinel, sched_getcpu(), first_node, move, node_of((void *)&shared_sentinel));
    fflush(stdout);

    for (int r = 0; r < repeats; r++) {
        pthread_barrier_init(&start_line, NULL, (unsigned)count);
        for (int t = 0; t < count; t++)
            if (pthread_create(&threads[t].id, NULL, worker, &threads[t]))
                perflab_die("cannot start thread %d", t);
        uint64_t slowest = 0, checksum = 0;
        for (int t = 0; t < count; t++) {
            pthread_join(threads[t].id, NULL);
            slowest = threads[t].elapsed_ns > slowest ? threads[t].elapsed_ns : slowest;
            checksum += threads[t].checksum;
        }
        pthread_barrier_destroy(&start_line);
        printf("{\"type\":\"sample\",\"arm\":\"%s\",\"k\":%ld,\"threads\":%d,\"ops\":%ld,\"repeat\":%d,"
               "\"elapsed_ns\":%llu,\"ns_per_op\":%.4f,\"checksum\":%llu}\n",
               ARMS[chosen_arm], every_k, count, ops, r, (unsigned long long)slowest, (double)slowest / ops,
               (unsigned long long)checksum);
        fflush(stdout);
    }
    return 0;
}
