/* commit: a storage engine commits batches of records with two threads, and
 * the function that burns the most CPU is not the one that sets the pace.
 *
 * For every batch, the commit thread parses the records, builds their index
 * and checksums the batch, while the log thread compresses the batch's log
 * record. A batch is committed when both are done (a barrier), so the batch
 * takes as long as the slower thread: the commit thread's 100 units, not the
 * log thread's 80. compress_log() is the largest single function (80 of 180
 * units of CPU time, 44%: a sampling profiler ranks it first), yet making it
 * faster cannot commit a single batch sooner. parse_records() (50 units, 28%)
 * is on the critical path: halving it saves 20 units per batch before the log
 * thread becomes the slower one.
 *
 * Every function's work is one line: a multiply-add chain of UNIT steps per
 * unit, which the compiler cannot shorten (each step needs the last). -x
 * FUNCTION=FACTOR scales one function's work, the way a real optimisation
 * would make its line run FACTOR times as long.
 *
 * The commit thread counts a progress point (COZ_PROGRESS_NAMED "batch")
 * for coz after every batch. One JSON line at the end: batches, seconds and
 * batches per second.
 *
 * usage: commit [-d SECONDS] [-u UNIT] [-c CPU,CPU] [-x FUNCTION=FACTOR]...
 *   FUNCTION: parse_records, build_index, checksum_batch or compress_log
 * examples:
 *   commit -d 2                        # commit batches for 2 s
 *   commit -d 1 -x parse_records=0.5   # parse_records made twice as fast
 *   commit -d 1 -c 1,0                 # commit thread on CPU 1, log thread on CPU 0
 */
#include "perflab_bench.h"
#include <coz.h>
#include <unistd.h>

// ANCHOR: work
/* FACTOR * UNITS units of work, as one source line for coz and perf to see. */
#define WORK(h, units, factor) \
    for (long i_ = 0, n_ = (long)((units) * (factor) * unit); i_ < n_; i_++) h = h * 6364136223846793005u + 1442695040888963407u

/* Multiply-add steps per unit: about 230 us on a 3 GHz core, so a batch lasts about 23 ms. coz samples
 * every 1 ms and pauses threads in rounds of 10 samples; batches much shorter than that would blur its
 * accounting (with 2 ms batches it predicted half the real speedup). */
static long unit = 150000;
static double parse_factor = 1, index_factor = 1, checksum_factor = 1, compress_factor = 1;

__attribute__((noinline)) static uint64_t parse_records(uint64_t h)
{
    WORK(h, 50, parse_factor);
    return h;
}

__attribute__((noinline)) static uint64_t build_index(uint64_t h)
{
    WORK(h, 25, index_factor);
    return h;
}

__attribute__((noinline)) static uint64_t checksum_batch(uint64_t h)
{
    WORK(h, 25, checksum_factor);
    return h;
}

__attribute__((noinline)) static uint64_t compress_log(uint64_t h)
{
    WORK(h, 80, compress_factor);
    return h;
}
// ANCHOR_END: work

static pthread_barrier_t batch_done;
static volatile int stopping;
/* Where both threads leave their results, so the compiler must do the work. */
static volatile uint64_t sink;
static int log_cpu = -1;

// ANCHOR: threads
static void *log_thread(void *arg)
{
    (void)arg;
    if (log_cpu >= 0)
        perflab_pin_self(log_cpu);
    uint64_t h = 2;
    for (;;) {
        h = compress_log(h);
        pthread_barrier_wait(&batch_done);      /* batch committed: both threads are done */
        pthread_barrier_wait(&batch_done);      /* the commit thread has decided whether to go on */
        if (stopping)
            break;
    }
    sink = h;
    return NULL;
}

/* Commit batches until `seconds` have passed; returns how many. */
static long commit_batches(double seconds)
{
    uint64_t h = 1, start = perflab_now_ns();
    long batches = 0;
    for (;;) {
        h = parse_records(h);
        h = build_index(h);
        h = checksum_batch(h);
        pthread_barrier_wait(&batch_done);
        batches++;
        COZ_PROGRESS_NAMED("batch");
        stopping = (perflab_now_ns() - start) / 1e9 >= seconds;
        pthread_barrier_wait(&batch_done);
        if (stopping)
            break;
    }
    sink = h;
    return batches;
}
// ANCHOR_END: threads

static void set_factor(const char *spec)
{
    const char *eq = strchr(spec, '=');
    char *end;
    double factor = eq ? strtod(eq + 1, &end) : 0;
    if (!eq || end == eq + 1 || *end || !(factor > 0 && factor <= 10))
        perflab_die("bad -x %s: give FUNCTION=FACTOR with 0 < FACTOR <= 10, e.g. parse_records=0.5", spec);
    size_t len = (size_t)(eq - spec);
    static const struct { const char *name; double *factor; } known[] = {
        {"parse_records", &parse_factor}, {"build_index", &index_factor},
        {"checksum_batch", &checksum_factor}, {"compress_log", &compress_factor},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strlen(known[i].name) == len && !strncmp(spec, known[i].name, len)) {
            *known[i].factor = factor;
            return;
        }
    perflab_die("bad -x %s: the functions are parse_records, build_index, checksum_batch and compress_log", spec);
}

int main(int argc, char **argv)
{
    double seconds = 1;
    int commit_cpu = -1;
    int opt;
    while ((opt = getopt(argc, argv, "d:u:c:x:")) != -1) {
        switch (opt) {
        case 'd': seconds = atof(optarg); break;
        case 'u': unit = atol(optarg); break;
        case 'c':
            if (sscanf(optarg, "%d,%d", &commit_cpu, &log_cpu) != 2 || commit_cpu < 0 || log_cpu < 0)
                perflab_die("bad -c %s: give two CPUs, COMMIT,LOG, e.g. -c 1,0", optarg);
            break;
        case 'x': set_factor(optarg); break;
        default:
            perflab_die("usage: commit [-d SECONDS] [-u UNIT] [-c CPU,CPU] [-x FUNCTION=FACTOR]...");
        }
    }
    if (!(seconds > 0) || unit <= 0)
        perflab_die("bad -d or -u: both must be positive (seconds, multiply-add steps per unit)");
    if (commit_cpu >= 0)
        perflab_pin_self(commit_cpu);
    pthread_barrier_init(&batch_done, NULL, 2);
    pthread_t log;
    pthread_create(&log, NULL, log_thread, NULL);
    uint64_t start = perflab_now_ns();
    long batches = commit_batches(seconds);
    double elapsed = (perflab_now_ns() - start) / 1e9;
    pthread_join(log, NULL);
    perflab_print_meta("commit");
    printf("{\"type\":\"sample\",\"batches\":%ld,\"seconds\":%.6f,\"batches_per_s\":%.3f}\n",
           batches, elapsed, batches / elapsed);
    return 0;
}
