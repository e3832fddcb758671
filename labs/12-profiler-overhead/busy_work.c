/* busy_work: the same CPU-bound work on every CPU given, timed; the workload a profiler competes with.
 *
 * One thread per CPU, each pinned, each running the same dependent chain of
 * integer steps (an xorshift generator: no memory traffic, no system calls).
 * The threads start together at a barrier; each times its own work, and the
 * process prints each thread's time and the wall time from the barrier to
 * the last thread's end: under `perf record -a`, that is what a user waits
 * for, with perf's own start-up and write-out left out. Overhead: every CPU
 * given, busy for the run.
 *
 * usage: busy_work [-n MILLION_STEPS] -c CPU[,CPU...]
 */
#include "perflab_bench.h"
#include <inttypes.h>
#include <pthread.h>

#define MAX_CPUS 1024

struct worker {
    pthread_t thread;
    int cpu;
    long steps;
    uint64_t start_ns, end_ns, result;
};

static pthread_barrier_t ready;

// ANCHOR: work
static void *work(void *arg)
{
    struct worker *w = arg;
    perflab_pin_self(w->cpu);
    uint64_t x = 88172645463325252ull + (uint64_t)w->cpu;
    pthread_barrier_wait(&ready);
    w->start_ns = perflab_now_ns();
    for (long i = 0; i < w->steps; i++) {  // each step needs the last: the core cannot overlap them
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    w->end_ns = perflab_now_ns();
    w->result = x;  // kept, so the compiler cannot drop the loop
    return NULL;
}
// ANCHOR_END: work

static int parse_cpus(char *list, struct worker *workers)
{
    int count = 0;
    for (char *item = strtok(list, ","); item; item = strtok(NULL, ",")) {
        char *end;
        long cpu = strtol(item, &end, 10);
        if (*end || cpu < 0 || cpu >= MAX_CPUS)
            perflab_die("bad CPU %s: give CPU numbers separated by commas", item);
        if (count == MAX_CPUS)
            perflab_die("too many CPUs: at most %d", MAX_CPUS);
        workers[count++].cpu = (int)cpu;
    }
    return count;
}

int main(int argc, char **argv)
{
    static struct worker workers[MAX_CPUS];
    long million = 200;
    int count = 0, opt;
    while ((opt = getopt(argc, argv, "n:c:")) != -1) {
        if (opt == 'n' && (million = atol(optarg)) >= 1 && million <= 1000000)
            continue;
        else if (opt == 'c')
            count = parse_cpus(optarg, workers);
        else
            perflab_die("usage: busy_work [-n MILLION_STEPS 1..1000000] -c CPU[,CPU...]");
    }
    if (count == 0)
        perflab_die("usage: busy_work [-n MILLION_STEPS 1..1000000] -c CPU[,CPU...]");
    pthread_barrier_init(&ready, NULL, (unsigned)count);
    for (int i = 0; i < count; i++) {
        workers[i].steps = million * 1000000;
        if (pthread_create(&workers[i].thread, NULL, work, &workers[i]))
            perflab_die("cannot start a thread for CPU %d", workers[i].cpu);
    }
    uint64_t first = UINT64_MAX, last = 0, check = 0;
    for (int i = 0; i < count; i++) {
        pthread_join(workers[i].thread, NULL);
        first = workers[i].start_ns < first ? workers[i].start_ns : first;
        last = workers[i].end_ns > last ? workers[i].end_ns : last;
        check ^= workers[i].result;
    }
    perflab_print_meta("busy_work");
    for (int i = 0; i < count; i++)
        printf("{\"type\":\"thread\",\"cpu\":%d,\"ns\":%" PRIu64 "}\n", workers[i].cpu,
               workers[i].end_ns - workers[i].start_ns);
    printf("{\"type\":\"sample\",\"cpus\":%d,\"million_steps\":%ld,\"wall_ns\":%" PRIu64 ",\"check\":%" PRIu64 "}\n",
           count, million, last - first, check & 0xff);
    return 0;
}
