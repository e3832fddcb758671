/* export: the exercises' program. It writes n flow records as one CSV text,
 * and prints a digest of the text, so a faster version can show it writes
 * the same. Somewhere in it hides a quadratic.
 *
 * One process writes the text for every n given, in an order rotated by -r,
 * as often as fits in MIN_NS (at least three times), and prints one JSON
 * line per n: the median time to write the whole text. -t 2000000000 writes
 * it for two seconds, for a profiler to watch.
 *
 * usage: export [-n SIZES] [-t MIN_NS] [-r ROTATION] [-C CPU]
 */
#include "perflab_bench.h"

#define MAX_SIZES 16
#define MAX_LINE 64
#define MIN_RUNS 3
#define MAX_RUNS 100000

struct record {
    uint32_t id, src, dst, bytes;
};

static uint64_t xorshift(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

__attribute__((noinline)) void make_records(struct record *records, long n)
{
    uint64_t seed = 0x2545F4914F6CDD1Du;
    for (long i = 0; i < n; i++) {
        uint64_t r = xorshift(&seed);
        records[i] = (struct record){(uint32_t)i, (uint32_t)r, (uint32_t)(r >> 32), (uint32_t)(r % 1500)};
    }
}

__attribute__((noinline)) int format_record(const struct record *r, char *line)
{
    return snprintf(line, MAX_LINE, "%u,%u,%u,%u\n", r->id, r->src, r->dst, r->bytes);
}

__attribute__((noinline)) size_t write_csv(const struct record *records, long n, char *text)
{
    char line[MAX_LINE];
    text[0] = '\0';
    for (long i = 0; i < n; i++) {
        format_record(&records[i], line);
        strcat(text, line);
    }
    return strlen(text);
}

static uint64_t digest(const char *text, size_t length)
{
    uint64_t hash = 0xCBF29CE484222325u; /* FNV-1a */
    for (size_t i = 0; i < length; i++)
        hash = (hash ^ (unsigned char)text[i]) * 0x100000001B3u;
    return hash;
}

static int parse_sizes(char *text, long *sizes)
{
    int count = 0;
    for (char *item = strtok(text, ","); item; item = strtok(NULL, ",")) {
        char *end;
        long value = strtol(item, &end, 10);
        if (*end || value < 1 || value > (1L << 22) || count == MAX_SIZES)
            perflab_die("bad size '%s': give up to %d record counts from 1 to %ld, comma-separated", item, MAX_SIZES,
                        1L << 22);
        sizes[count++] = value;
    }
    return count;
}

int main(int argc, char **argv)
{
    char default_sizes[] = "1250,2500,5000,10000";
    char *sizes_text = default_sizes;
    long sizes[MAX_SIZES], min_ns = 2000000, rotation = 0, cpu = -1;
    int opt;
    while ((opt = getopt(argc, argv, "n:t:r:C:")) != -1) {
        switch (opt) {
        case 'n': sizes_text = optarg; break;
        case 't': min_ns = atol(optarg); break;
        case 'r': rotation = atol(optarg); break;
        case 'C': cpu = atol(optarg); break;
        default: perflab_die("usage: export [-n SIZES] [-t MIN_NS] [-r ROTATION] [-C CPU]");
        }
    }
    if (min_ns < 1 || rotation < 0)
        perflab_die("-t must be positive and -r not negative");
    int n_sizes = parse_sizes(sizes_text, sizes);
    if (cpu >= 0)
        perflab_pin_self((int)cpu);
    perflab_print_meta("export");

    static double run_ns[MAX_RUNS];
    for (int v = 0; v < n_sizes; v++) {
        long n = sizes[(v + rotation) % n_sizes];
        struct record *records = malloc(n * sizeof *records);
        char *text = malloc(n * MAX_LINE + 1);
        if (!records || !text)
            perflab_die("out of memory for %ld records", n);
        make_records(records, n);
        size_t length = write_csv(records, n, text); /* warm-up */
        long runs = 0;
        uint64_t elapsed = 0;
        while ((elapsed < (uint64_t)min_ns || runs < MIN_RUNS) && runs < MAX_RUNS) {
            uint64_t start = perflab_now_ns();
            length = write_csv(records, n, text);
            run_ns[runs] = (double)(perflab_now_ns() - start);
            elapsed += (uint64_t)run_ns[runs++];
        }
        printf("{\"type\":\"sample\",\"n\":%ld,\"runs\":%ld,\"bytes\":%zu,\"digest\":\"%016llx\",\"ns_per_text\":%.1f}\n",
               n, runs, length, (unsigned long long)digest(text, length), perflab_median(run_ns, runs));
        free(records);
        free(text);
    }
    return 0;
}
