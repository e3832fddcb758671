/* ingest: a two-stage pipeline that loads compressed blocks into an index.
 * The exercise program of lab 7: profile it, find the line worth optimising,
 * optimise it, and measure.
 *
 * The reader thread inflates each block and hands it over through a queue of
 * QUEUE blocks; the main thread tokenizes the block and indexes the tokens.
 * The main thread counts a progress point (COZ_PROGRESS_NAMED "block") for
 * every block indexed.
 *
 * One JSON line at the end: blocks, seconds, blocks per second, and a digest
 * of the index. An optimisation must not change the digest.
 *
 * usage: ingest [-n BLOCKS] [-c CPU,CPU]
 * examples:
 *   ingest                 # 200 blocks
 *   ingest -n 50 -c 1,0    # 50 blocks, main thread on CPU 1, reader on CPU 0
 */
#include "perflab_bench.h"
#include <coz.h>
#include <unistd.h>

#define WORDS 4096   /* 64-bit words per block */
#define TABLE 1024   /* entries in the inflate dictionary */
#define QUEUE 4      /* blocks in flight between the threads */
#define MIX(h, x) ((h) * 6364136223846793005u + (x))

struct block {
    uint64_t words[WORDS];
};

static struct block queue[QUEUE];
static long produced, consumed, total_blocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int reader_cpu = -1;

/* Expand a block with the dictionary. */
__attribute__((noinline)) static void inflate_block(long number, struct block *out)
{
    uint64_t table[TABLE];
    for (int i = 0; i < TABLE; i++) {
        uint64_t h = (uint64_t)i;
        for (int round = 0; round < 5860; round++)
            h = MIX(h, round);
        table[i] = h;
    }
    uint64_t h = (uint64_t)number;
    for (int i = 0; i < WORDS; i++) {
        for (int round = 0; round < 1650; round++)
            h = MIX(h, table[(i + round) % TABLE]);
        out->words[i] = h;
    }
}

/* A hash of the whole block, which every token is salted with. */
__attribute__((noipa)) static uint64_t block_hash(const struct block *b)
{
    uint64_t h = 0;
    for (int i = 0; i < WORDS; i++)
        h = MIX(h, b->words[i]);
    return h;
}

__attribute__((noinline)) static void tokenize(const struct block *b, uint64_t *tokens, int count)
{
    for (int t = 0; t < count; t++)
        tokens[t] = block_hash(b) ^ b->words[t % WORDS];
}

__attribute__((noinline)) static uint64_t index_tokens(const uint64_t *tokens, int count)
{
    uint64_t h = 0;
    for (int t = 0; t < count; t++)
        for (int round = 0; round < 1760; round++)
            h = MIX(h, tokens[t] + round);
    return h;
}

static void *reader(void *arg)
{
    (void)arg;
    if (reader_cpu >= 0)
        perflab_pin_self(reader_cpu);
    for (long n = 0; n < total_blocks; n++) {
        pthread_mutex_lock(&lock);
        while (produced - consumed == QUEUE)
            pthread_cond_wait(&changed, &lock);
        pthread_mutex_unlock(&lock);
        inflate_block(n, &queue[n % QUEUE]);
        pthread_mutex_lock(&lock);
        produced++;
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

#define TOKENS 2560

int main(int argc, char **argv)
{
    int main_cpu = -1, opt;
    total_blocks = 200;
    while ((opt = getopt(argc, argv, "n:c:")) != -1) {
        switch (opt) {
        case 'n': total_blocks = atol(optarg); break;
        case 'c':
            if (sscanf(optarg, "%d,%d", &main_cpu, &reader_cpu) != 2 || main_cpu < 0 || reader_cpu < 0)
                perflab_die("bad -c %s: give two CPUs, MAIN,READER, e.g. -c 1,0", optarg);
            break;
        default:
            perflab_die("usage: ingest [-n BLOCKS] [-c CPU,CPU]");
        }
    }
    if (total_blocks <= 0)
        perflab_die("bad -n: give a positive number of blocks");
    if (main_cpu >= 0)
        perflab_pin_self(main_cpu);
    static uint64_t tokens[TOKENS];
    uint64_t digest = 0, start = perflab_now_ns();
    pthread_t thread;
    pthread_create(&thread, NULL, reader, NULL);
    for (long n = 0; n < total_blocks; n++) {
        pthread_mutex_lock(&lock);
        while (produced == consumed)
            pthread_cond_wait(&changed, &lock);
        pthread_mutex_unlock(&lock);
        tokenize(&queue[n % QUEUE], tokens, TOKENS);
        digest = MIX(digest, index_tokens(tokens, TOKENS));
        pthread_mutex_lock(&lock);
        consumed++;
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&lock);
        COZ_PROGRESS_NAMED("block");
    }
    pthread_join(thread, NULL);
    double seconds = (perflab_now_ns() - start) / 1e9;
    perflab_print_meta("ingest");
    printf("{\"type\":\"sample\",\"blocks\":%ld,\"seconds\":%.6f,\"blocks_per_s\":%.3f,\"digest\":\"%016llx\"}\n",
           total_blocks, seconds, total_blocks / seconds, (unsigned long long)digest);
    return 0;
}
