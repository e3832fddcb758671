/* hunt: a toy key-value cache with many globals, and one of them written by every thread on every operation.
 *
 * USAGE: hunt [-c CPUS] [-n OPS]
 *   -c CPUS   one worker thread per CPU, pinned (default 0,1)
 *   -n OPS    lookups per thread (default 20000)
 *
 * Which global is the hot one is chosen when it is built (-DHOT=name); find it without reading this file:
 *   nm -S --size-sort build/05-numa-static-data/hunt     the globals, their sizes and sections (B/b .bss, D/d .data)
 *   perf stat -e mem:0xADDR:w build/05-numa-static-data/hunt    writes to one address (a debug register)
 * It is linked without PIE, so the addresses nm prints are the addresses at run time.
 */
#include "perflab_bench.h"

#ifndef HOT
#define HOT lru_sentinel
#endif
#define SLOTS 1024
#define STATS_EVERY 4096 /* a thread folds its private counts into the shared stats this often */

struct node {
    uint64_t key, value;
    struct node *prev, *next;
};

/* Settings, written once at start. */
uint64_t config_capacity = SLOTS;
uint64_t config_ttl_ms = 60000;
uint64_t config_shards = 1;
uint64_t config_hash_seed = 0x9e3779b97f4a7c15u;
char config_name[32] = "toy-cache";
int64_t config_log_level;

/* Shared statistics, written every STATS_EVERY operations. */
uint64_t stat_lookups, stat_hits, stat_misses, stat_evictions, stat_bytes;

/* Tables, read on every operation. */
uint64_t bucket_keys[SLOTS];
uint32_t crc_table[256];

/* List heads and sentinels: every thread's lookups pass through them. */
struct node lru_sentinel, free_sentinel, empty_bucket;
struct node *lru_head = &lru_sentinel, *free_list = &free_sentinel;
uint64_t generation = 1;

static long ops_per_thread = 20000;
static pthread_barrier_t start_line;

/* Always 0, unknown to the compiler: it makes each touch of the hot global wait for the lookup before it,
 * as in a tree walk (see shared_global.c). */
volatile uint64_t dependency_mask;

/* Like tree code that meets an empty tree's sentinel: read it, then store the value it already holds. */
#define TOUCH_HOT(key, mask)                                                                     \
    do {                                                                                         \
        volatile uint64_t *hot = (volatile uint64_t *)((uintptr_t)&(HOT) + ((key) & (mask)));    \
        (key) ^= *hot;                                                                           \
        *hot = 0;                                                                                \
    } while (0)

/* The key's hash, as a cache computes it for every lookup: a few dependent multiply-xorshift rounds. */
static inline uint64_t hash_key(uint64_t key)
{
    for (int i = 0; i < 8; i++) {
        key ^= key >> 29;
        key *= config_hash_seed | 1;
    }
    return key;
}

static void *worker(void *arg)
{
    perflab_pin_self((int)(intptr_t)arg);
    uint64_t key = (uint64_t)(intptr_t)arg * 7919, hits = 0, misses = 0;
    const uint64_t mask = dependency_mask;
    pthread_barrier_wait(&start_line); /* all threads start together, so their lookups overlap */
    for (long op = 1; op <= ops_per_thread; op++) {
        key = hash_key(key + 1);
        uint64_t slot = (key ^ crc_table[key & 255]) & (config_capacity - 1); /* SLOTS is a power of 2 */
        if (bucket_keys[slot] == key)
            hits++;
        else
            misses++;
        TOUCH_HOT(key, mask); /* the bug: every lookup writes one shared global, whatever its outcome */
        if (op % STATS_EVERY == 0) {
            __atomic_fetch_add(&stat_lookups, STATS_EVERY, __ATOMIC_RELAXED);
            __atomic_fetch_add(&stat_hits, hits, __ATOMIC_RELAXED);
            __atomic_fetch_add(&stat_misses, misses, __ATOMIC_RELAXED);
            hits = misses = 0;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int cpus[64], count = 0, opt;
    perflab_print_meta("hunt");
    const char *list = "0,1";
    while ((opt = getopt(argc, argv, "c:n:")) != -1) {
        if (opt == 'c')
            list = optarg;
        else if (opt == 'n' && atol(optarg) > 0)
            ops_per_thread = atol(optarg);
        else
            perflab_die("usage: %s [-c CPUS] [-n OPS], e.g. -c 0,1 -n 20000", argv[0]);
    }
    for (char *copy = strdup(list), *part = strtok(copy, ","); part && count < 64; part = strtok(NULL, ","))
        cpus[count++] = atoi(part);
    if (count < 1)
        perflab_die("bad CPU list %s: give CPU numbers separated by commas, e.g. 0,1", list);

    for (int i = 0; i < 256; i++)
        crc_table[i] = (uint32_t)(i * 0x04c11db7u);
    for (int i = 0; i < SLOTS; i++)
        bucket_keys[i] = (uint64_t)i * config_hash_seed;
    lru_sentinel.next = lru_sentinel.prev = &lru_sentinel;
    empty_bucket.key = UINT64_MAX;
    generation++;

    pthread_t threads[64];
    pthread_barrier_init(&start_line, NULL, (unsigned)count);
    uint64_t start = perflab_now_ns();
    for (int t = 0; t < count; t++)
        if (pthread_create(&threads[t], NULL, worker, (void *)(intptr_t)cpus[t]))
            perflab_die("cannot start thread %d", t);
    for (int t = 0; t < count; t++)
        pthread_join(threads[t], NULL);
    uint64_t elapsed = perflab_now_ns() - start;
    printf("{\"type\":\"sample\",\"threads\":%d,\"ops\":%ld,\"lookups\":%llu,\"elapsed_ns\":%llu,\"mops\":%.3f}\n",
           count, ops_per_thread, (unsigned long long)stat_lookups, (unsigned long long)elapsed,
           1e3 * count * ops_per_thread / elapsed);
    return 0;
}
