/* sessiond's harness: worker threads take batches of requests in turn and pass each request through the
   stages in service.c. It times each batch and, in a sample of requests, each stage, and reports throughput,
   batch latency and a checksum of every answer.
   The course grades with its own copy of this file and of service.h: fix service.c and start.sh, not these. */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service.h"

#define BATCH 64  /* requests a worker takes at a time: one latency each */
#define SAMPLE_BITS 4
#define SAMPLED (1 << SAMPLE_BITS) /* one request in 16 is timed stage by stage */
enum { PARSE, LOOKUP, ACCOUNT, EXPIRE, RESPOND, STAGES };
static const char *stage_names[STAGES] = {"parse", "lookup", "account", "expire", "respond"};

static long requests = 2000000, threads = 2;
static uint64_t salt; /* the grader's, new each run: answers nobody can know without doing the work */
static int cpus[MAX_THREADS], n_cpus;
static pthread_barrier_t start_line;

struct worker_run {
    int id;
    double stage_s[STAGES];
    double *batch_s;  /* each batch's latency, for the percentiles */
    long batches;
    uint64_t digest;
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* What reading the clock adds to a timed stage: the fastest of many back-to-back reads. */
static double clock_cost;
static void measure_clock_cost(void)
{
    clock_cost = 1;
    for (int i = 0; i < 10000; i++) {
        double a = now(), b = now();
        clock_cost = b - a < clock_cost ? b - a : clock_cost;
    }
}

/* The client's request number `id`: a key from a skewed mix of returning and new clients, and a size. */
static struct request make_request(uint64_t id)
{
    uint64_t x = (id + 1 + salt * 0x2545f4914f6cdd1dull) * 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    uint32_t key = (x & 3) ? (uint32_t)(x >> 8) : (uint32_t)(x >> 8) % 4096; /* 1 in 4 from 4096 regulars */
    return (struct request){.id = id, .key = key, .bytes = 64 + (uint32_t)(x >> 52)};
}

/* One request through every stage. */
static void serve(struct worker *w, uint64_t id, struct worker_run *run)
{
    struct request r = make_request(id);
    parse_request(w, &r);
    find_session(w, &r);
    account(w, &r);
    expire_sessions(w);
    run->digest += build_response(w, &r);
}

/* ANCHOR: serve_timed */
/* The same, with each stage timed: one request in SAMPLED, as reading the clock costs as much as a stage; which
   ones depends on the salt, so that no stage can tell a timed request from the others by its id. */
static void serve_timed(struct worker *w, uint64_t id, struct worker_run *run)
{
    double t[STAGES + 1];
    struct request r = make_request(id);
    t[0] = now();
    parse_request(w, &r);
    t[1] = now();
    find_session(w, &r);
    t[2] = now();
    account(w, &r);
    t[3] = now();
    expire_sessions(w);
    t[4] = now();
    run->digest += build_response(w, &r);
    t[5] = now();
    for (int s = 0; s < STAGES; s++)
        run->stage_s[s] += (t[s + 1] - t[s] - clock_cost) * SAMPLED;
}
/* ANCHOR_END: serve_timed */

static void *worker_main(void *arg)
{
    struct worker_run *run = arg;
    if (n_cpus) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus[run->id % n_cpus], &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
            fprintf(stderr, "sessiond: cannot pin worker %d to CPU %d\n", run->id, cpus[run->id % n_cpus]);
            exit(2);
        }
    }
    struct worker *w = worker_new(run->id);
    run->batch_s = calloc(requests / BATCH / threads + 2, sizeof *run->batch_s);
    pthread_barrier_wait(&start_line);
    for (long first = run->id * BATCH; first < requests; first += BATCH * threads) {
        long last = first + BATCH < requests ? first + BATCH : requests;
        double batch_start = now();
        for (long id = first; id < last; id++)
            if (((id ^ salt) * 0xd6e8feb86659fd93ull) >> (64 - SAMPLE_BITS) == 0)
                serve_timed(w, id, run);
            else
                serve(w, id, run);
        run->batch_s[run->batches++] = now() - batch_start;
    }
    return NULL;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(FILE *out)
{
    fprintf(out, "usage: sessiond [--threads N] [--cpus LIST] [--requests N] [--json] [--salt N]\n"
                 "  --threads N    worker threads (default 2)\n"
                 "  --cpus LIST    pin worker i to the i-th CPU of LIST, e.g. 0,1 (default: not pinned)\n"
                 "  --requests N   requests to serve (default 2000000)\n"
                 "  --json         one JSON line, with each stage's ns per request\n"
                 "  --salt N       vary the requests (the grade does, so that answers cannot be known beforehand)\n");
}

static long number(const char *text, long low, long high, const char *what)
{
    char *end;
    long value = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value < low || value > high) {
        fprintf(stderr, "sessiond: %s takes a number from %ld to %ld, not '%s'\n", what, low, high, text);
        exit(2);
    }
    return value;
}

int main(int argc, char **argv)
{
    static const struct option options[] = {{"threads", 1, 0, 't'}, {"cpus", 1, 0, 'c'}, {"requests", 1, 0, 'r'},
                                            {"json", 0, 0, 'j'},    {"salt", 1, 0, 's'},  {"help", 0, 0, 'h'},
                                            {0, 0, 0, 0}};
    int json = 0, option;
    while ((option = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (option == 't')
            threads = number(optarg, 1, MAX_THREADS, "--threads");
        else if (option == 'r')
            requests = number(optarg, 1, 1000000000, "--requests");
        else if (option == 'j')
            json = 1;
        else if (option == 's')
            salt = (uint64_t)number(optarg, 0, 1L << 62, "--salt");
        else if (option == 'c')
            for (char *cpu = strtok(optarg, ","); cpu && n_cpus < MAX_THREADS; cpu = strtok(NULL, ","))
                cpus[n_cpus++] = (int)number(cpu, 0, CPU_SETSIZE - 1, "--cpus");
        else {
            usage(option == 'h' ? stdout : stderr);
            return option == 'h' ? 0 : 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }

    measure_clock_cost();
    struct worker_run runs[MAX_THREADS] = {0};
    pthread_t ids[MAX_THREADS];
    pthread_barrier_init(&start_line, NULL, threads + 1);
    for (int i = 0; i < threads; i++) {
        runs[i].id = i;
        pthread_create(&ids[i], NULL, worker_main, &runs[i]);
    }
    pthread_barrier_wait(&start_line);
    double start = now();
    for (int i = 0; i < threads; i++)
        pthread_join(ids[i], NULL);
    double seconds = now() - start;

    uint64_t checksum = service_summary();
    double stage_ns[STAGES] = {0}, *latency = malloc((requests / BATCH + threads + 1) * sizeof *latency);
    long batches = 0;
    for (int i = 0; i < threads; i++) {
        checksum += runs[i].digest;
        for (int s = 0; s < STAGES; s++)
            stage_ns[s] += runs[i].stage_s[s] * 1e9 / requests;
        memcpy(latency + batches, runs[i].batch_s, runs[i].batches * sizeof *latency);
        batches += runs[i].batches;
    }
    qsort(latency, batches, sizeof *latency, by_value);
    double p50 = latency[batches / 2] * 1e6, p99 = latency[batches * 99 / 100] * 1e6;
    if (json) {
        printf("{\"requests\": %ld, \"threads\": %ld, \"seconds\": %.6f, \"p50_us\": %.2f, \"p99_us\": %.2f, "
               "\"checksum\": \"%016llx\", \"stage_ns\": {",
               requests, threads, seconds, p50, p99, (unsigned long long)checksum);
        for (int s = 0; s < STAGES; s++)
            printf("%s\"%s\": %.1f", s ? ", " : "", stage_names[s], stage_ns[s]);
        printf("}}\n");
    } else {
        printf("sessiond: %ld requests on %ld threads in %.3f s: %.0f requests/s\n", requests, threads, seconds,
               requests / seconds);
        printf("batch of %d: p50 %.1f us, p99 %.1f us; checksum %016llx\n", BATCH, p50, p99,
               (unsigned long long)checksum);
    }
    return 0;
}
