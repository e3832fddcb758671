/* aggressor: stream over a buffer of a chosen size, as fast as one core can.
 *
 * It reads one word from every 64-byte line of the buffer, pass after pass,
 * so every line of the buffer goes through this core's caches and the
 * shared LLC, over and over. A buffer larger than the LLC keeps replacing
 * the LLC's contents; one that fits stays in it after the first pass.
 *
 * The whole buffer (the largest size it will be asked for) is allocated and
 * touched before anything is timed, with transparent huge pages if the
 * kernel allows, so page faults never interrupt the stream.
 *
 * With -i it takes orders on stdin, one per line: a size in bytes (stream
 * over that much of the buffer; it answers {"type":"ready",...} after one
 * full pass) or 0 (stop streaming and wait, using no CPU). Before obeying,
 * it reports the finished period: size, seconds and GB/s. The lab uses this
 * to change sizes without reallocating. End of input ends it.
 * Without -i it streams SIZE bytes for SECONDS (default: until Ctrl-C) and
 * prints one period line.
 *
 * usage: aggressor -c CPU -s SIZE [-m MAX_SIZE] [-d SECONDS] [-i]
 *   sizes in bytes with an optional K, M or G suffix
 * examples:
 *   aggressor -c 7 -s 40M -d 10          # twice a 20 MiB LLC, on core 7, for 10 s
 *   aggressor -c 1 -s 0 -m 512M -i       # wait for sizes on stdin
 */
#include "perflab_bench.h"
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#define LINE 64
#define HUGE_PAGE (2u << 20)

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

// ANCHOR: stream
/* One pass: one load per line, summed so the loads cannot be dropped. */
static uint64_t stream_pass(const uint64_t *buffer, size_t bytes)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < bytes / sizeof *buffer; i += LINE / sizeof *buffer)
        sum += buffer[i];
    return sum;
}
// ANCHOR_END: stream

/* A line from stdin if one is waiting (or `wait` is set); NULL at end of input. */
static const char *read_order(int wait, char *text, size_t size, int *eof)
{
    struct pollfd fd = {.fd = 0, .events = POLLIN};
    if (!wait && poll(&fd, 1, 0) <= 0)
        return NULL;
    size_t n = 0;
    for (char c; n + 1 < size;) {
        ssize_t got = read(0, &c, 1);
        if (got <= 0) {
            *eof = 1;
            return NULL;
        }
        if (c == '\n')
            break;
        text[n++] = c;
    }
    text[n] = 0;
    return text;
}

static void report_period(size_t bytes, uint64_t streamed, uint64_t ns)
{
    printf("{\"type\":\"period\",\"bytes\":%zu,\"seconds\":%.3f,\"gb_per_s\":%.2f}\n", bytes, ns / 1e9,
           ns ? (double)streamed / ns : 0.0);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int cpu = -1, interactive = 0;
    size_t size = 0, max_size = 0;
    double seconds = 0;
    int size_given = 0;
    for (int opt; (opt = getopt(argc, argv, "c:s:m:d:i")) != -1;) {
        switch (opt) {
        case 'c': cpu = atoi(optarg); break;
        case 's': size = perflab_parse_size(optarg), size_given = 1; break;
        case 'm': max_size = perflab_parse_size(optarg); break;
        case 'd': seconds = atof(optarg); break;
        case 'i': interactive = 1; break;
        default: perflab_die("usage: aggressor -c CPU -s SIZE [-m MAX_SIZE] [-d SECONDS] [-i]");
        }
    }
    if (cpu < 0 || !size_given)
        perflab_die("aggressor: give the CPU with -c and the buffer size with -s (e.g. -c 1 -s 64M)");
    if (!interactive && size < LINE)
        perflab_die("aggressor: -s %zu is less than one line: give at least 64 bytes (or use -i)", size);
    if (max_size < size)
        max_size = size;
    perflab_pin_self(cpu);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    size_t allocated = (max_size + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    uint64_t *buffer = aligned_alloc(HUGE_PAGE, allocated);
    if (!buffer)
        perflab_die("aggressor: cannot allocate %zu MiB: give a smaller -m or free some memory", allocated >> 20);
    madvise(buffer, allocated, MADV_HUGEPAGE); /* best effort: without THP it is only slower to set up */
    memset(buffer, 1, allocated);
    perflab_print_meta("aggressor");
    fflush(stdout);

    uint64_t sink = 0, streamed = 0, start = perflab_now_ns();
    uint64_t deadline = seconds > 0 ? start + (uint64_t)(seconds * 1e9) : UINT64_MAX;
    int eof = 0, announce = interactive && size > 0;
    char text[64];
    while (!stop && !eof && perflab_now_ns() < deadline) {
        const char *order = interactive ? read_order(size == 0, text, sizeof text, &eof) : NULL;
        if (order) {
            size_t next = perflab_parse_size(order);
            if (next > max_size || (next && next < LINE))
                perflab_die("aggressor: size %zu is outside 64 bytes to -m %zu", next, max_size);
            report_period(size, streamed, perflab_now_ns() - start);
            size = next, streamed = 0, start = perflab_now_ns();
            announce = size > 0;
            if (!size) {
                printf("{\"type\":\"ready\",\"bytes\":0}\n");
                fflush(stdout);
            }
        }
        if (size) {
            sink += stream_pass(buffer, size);
            streamed += size;
        }
        if (announce) {
            printf("{\"type\":\"ready\",\"bytes\":%zu}\n", size);
            fflush(stdout);
            announce = 0;
        }
    }
    report_period(size, streamed, perflab_now_ns() - start);
    printf("{\"type\":\"end\",\"sum\":%llu}\n", (unsigned long long)sink);
    return 0;
}
