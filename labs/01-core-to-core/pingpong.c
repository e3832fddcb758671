/* pingpong: one-way latency between two CPUs, measured by bouncing a cache line.
 *
 * Two threads, pinned to CPU A and CPU B, hand a token back and forth.
 * Each hand-over moves a cache line from one core's cache to the other's,
 * so the time per hand-over is the core-to-core latency: short between SMT
 * siblings, longer across a shared L3, longest across sockets.
 *
 *   -m cas        both threads compare-and-swap one shared line (like a spinlock)
 *   -m two-lines  each thread writes its own line and reads the other's
 *                 (like a ring buffer); the seed's "two shared counters"
 *
 * Each sample times R round trips; one-way latency = time / R / 2.
 * Overhead: two busy-spinning threads for the whole run.
 *
 * usage: pingpong -C A,B [-m cas|two-lines] [-r ROUND_TRIPS] [-s SAMPLES] [-w WARMUP]
 */
#include "perflab_bench.h"
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

enum mode { MODE_CAS, MODE_TWO_LINES };

struct shared {
    _Alignas(PERFLAB_LINE) atomic_int token;   /* cas: 0 = ping's turn, 1 = pong's */
    _Alignas(PERFLAB_LINE) atomic_long ping;   /* two-lines: written only by ping */
    _Alignas(PERFLAB_LINE) atomic_long pong;   /* two-lines: written only by pong */
};

struct args {
    enum mode mode;
    int cpu_a, cpu_b;
    long round_trips, samples, warmup;
};

static struct shared shared;
static pthread_barrier_t start;

// ANCHOR: cas
/* Wait until the token says it is my turn, then hand it over in one atomic step. */
static inline void cas_hand_over(int mine, int theirs)
{
    int expected = mine;
    while (!atomic_compare_exchange_weak_explicit(&shared.token, &expected, theirs,
                                                  memory_order_relaxed, memory_order_relaxed))
        expected = mine;
}
// ANCHOR_END: cas

// ANCHOR: two_lines
/* Wait until the other side has published round `n`, then publish my own. */
static inline void two_lines_reply(atomic_long *theirs, atomic_long *mine, long n)
{
    while (atomic_load_explicit(theirs, memory_order_acquire) != n)
        ;
    atomic_store_explicit(mine, n, memory_order_release);
}
// ANCHOR_END: two_lines

static void *pong_thread(void *p)
{
    const struct args *a = p;
    long total = (a->warmup + a->samples) * a->round_trips;
    perflab_pin_self(a->cpu_b);
    pthread_barrier_wait(&start);
    for (long n = 1; n <= total; n++) {
        if (a->mode == MODE_CAS)
            cas_hand_over(1, 0);
        else
            two_lines_reply(&shared.ping, &shared.pong, n);
    }
    return NULL;
}

/* One round trip from ping's side: hand over, then wait for the reply. */
static inline void ping_round_trip(enum mode mode, long n)
{
    if (mode == MODE_CAS) {
        cas_hand_over(0, 1);
    } else {
        atomic_store_explicit(&shared.ping, n, memory_order_release);
        while (atomic_load_explicit(&shared.pong, memory_order_acquire) != n)
            ;
    }
}

static void parse(int argc, char **argv, struct args *a)
{
    *a = (struct args){ .mode = MODE_CAS, .cpu_a = -1, .cpu_b = -1,
                        .round_trips = 1000, .samples = 100, .warmup = 10 };
    int opt;
    while ((opt = getopt(argc, argv, "C:m:r:s:w:")) != -1) {
        switch (opt) {
        case 'C':
            if (sscanf(optarg, "%d,%d", &a->cpu_a, &a->cpu_b) != 2)
                perflab_die("-C takes two CPUs, like -C 0,1");
            break;
        case 'm':
            if (!strcmp(optarg, "cas")) a->mode = MODE_CAS;
            else if (!strcmp(optarg, "two-lines")) a->mode = MODE_TWO_LINES;
            else perflab_die("-m takes cas or two-lines, not %s", optarg);
            break;
        case 'r': a->round_trips = atol(optarg); break;
        case 's': a->samples = atol(optarg); break;
        case 'w': a->warmup = atol(optarg); break;
        default:
            perflab_die("usage: pingpong -C A,B [-m cas|two-lines] [-r ROUND_TRIPS] [-s SAMPLES] [-w WARMUP]");
        }
    }
    if (a->cpu_a < 0 || a->cpu_b < 0)
        perflab_die("pingpong needs two CPUs: -C A,B (see `perflab probe` for the online CPUs)");
    if (a->cpu_a == a->cpu_b)
        perflab_die("-C %d,%d: the two threads need two different CPUs", a->cpu_a, a->cpu_b);
    if (a->round_trips < 1 || a->samples < 1 || a->warmup < 0)
        perflab_die("-r and -s must be at least 1, -w at least 0");
}

int main(int argc, char **argv)
{
    struct args a;
    pthread_t pong;
    parse(argc, argv, &a);

    perflab_pin_self(a.cpu_a);
    pthread_barrier_init(&start, NULL, 2);
    if (pthread_create(&pong, NULL, pong_thread, &a))
        perflab_die("cannot start the second thread");
    perflab_print_meta("pingpong");
    pthread_barrier_wait(&start);

    const char *mode = a.mode == MODE_CAS ? "cas" : "two-lines";
    long n = 0;
    for (long s = 0; s < a.warmup + a.samples; s++) {
        uint64_t t0 = perflab_now_ns();
        for (long r = 0; r < a.round_trips; r++)
            ping_round_trip(a.mode, ++n);
        uint64_t elapsed = perflab_now_ns() - t0;
        printf("{\"type\":\"sample\",\"mode\":\"%s\",\"cpus\":[%d,%d],\"warmup\":%s,"
               "\"round_trips\":%ld,\"elapsed_ns\":%llu,\"one_way_ns\":%.3f}\n",
               mode, a.cpu_a, a.cpu_b, s < a.warmup ? "true" : "false",
               a.round_trips, (unsigned long long)elapsed, (double)elapsed / a.round_trips / 2.0);
    }
    pthread_join(pong, NULL);
    return 0;
}
