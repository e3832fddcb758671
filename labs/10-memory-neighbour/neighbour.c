/* neighbour: a process that owns a large buffer and does one of four things with it.
 *
 *   idle      nothing: it waits on stdin and uses no CPU
 *   compute   integer arithmetic in registers: a busy CPU that sends the
 *             memory controller nothing
 *   write     stores to every byte of the buffer, pass after pass: each line
 *             is read for ownership, then written back (two transfers per line)
 *   nt-write  the same stores, non-temporal: they go around the caches
 *             straight to memory (one transfer per line, no cache pollution)
 *
 * Its resident memory (RSS) is the whole buffer in every mode: it is
 * allocated and touched before the first mode starts. Only what it does
 * with the memory changes.
 *
 * With -i it takes modes on stdin, one per line. Before obeying, it reports
 * the period that just ended (mode, seconds, bytes written, GB/s, compute
 * operations); once the new mode has run one chunk it says "ready". End of
 * input ends it. Without -i it runs MODE for -d SECONDS and prints one period.
 *
 * usage: neighbour -c CPU -m SIZE [-w MODE -d SECONDS] [-i]
 * examples:
 *   neighbour -c 0 -m 1G -w write -d 5       # stream stores through 1 GiB for 5 s
 *   neighbour -c 0 -m 1G -i                  # wait for modes on stdin
 */
#include "perflab_bench.h"
#include <poll.h>
#include <sys/mman.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define HUGE_PAGE (2u << 20)
#define CHUNK (2u << 20) /* bytes written between two looks at stdin */
#define COMPUTE_STEPS (1u << 20)

enum mode { IDLE, COMPUTE, WRITE, NT_WRITE };
static const char *const NAMES[] = {"idle", "compute", "write", "nt-write"};

static enum mode parse_mode(const char *text)
{
    for (int m = IDLE; m <= NT_WRITE; m++)
        if (!strcmp(text, NAMES[m]))
            return (enum mode)m;
    perflab_die("neighbour: unknown mode '%s': give idle, compute, write or nt-write", text);
    return IDLE;
}

// ANCHOR: write
/* Plain stores: the core reads each line for ownership before it writes it. */
static void write_chunk(uint64_t *words, size_t count, uint64_t value)
{
    for (size_t i = 0; i < count; i++)
        words[i] = value + i;
}

/* Non-temporal stores: write-combined in the core, sent to memory as whole lines. */
static void nt_write_chunk(uint64_t *words, size_t count, uint64_t value)
{
#if defined(__x86_64__)
    for (size_t i = 0; i < count; i++)
        _mm_stream_si64((long long *)&words[i], (long long)(value + i));
    _mm_sfence();
#else
    (void)words, (void)count, (void)value;
    perflab_die("neighbour: nt-write needs x86-64's non-temporal stores (MOVNTI)");
#endif
}
// ANCHOR_END: write

// ANCHOR: compute
/* A chain of xorshift steps: every step waits for the one before, in registers only. */
static uint64_t compute_chunk(uint64_t state)
{
    for (unsigned i = 0; i < COMPUTE_STEPS; i++)
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
}
// ANCHOR_END: compute

static int order_waiting(void)
{
    struct pollfd fd = {.fd = 0, .events = POLLIN};
    return poll(&fd, 1, 0) > 0;
}

static void report(enum mode mode, uint64_t ns, uint64_t bytes, uint64_t steps)
{
    printf("{\"type\":\"period\",\"mode\":\"%s\",\"seconds\":%.3f,\"bytes\":%llu,\"gb_per_s\":%.3f,"
           "\"steps_per_ns\":%.4f}\n", NAMES[mode], ns / 1e9, (unsigned long long)bytes,
           ns ? (double)bytes / ns : 0.0, ns ? (double)steps / ns : 0.0);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int cpu = -1, interactive = 0;
    size_t size = 0;
    double seconds = 0;
    enum mode mode = IDLE;
    for (int opt; (opt = getopt(argc, argv, "c:m:w:d:i")) != -1;) {
        switch (opt) {
        case 'c': cpu = atoi(optarg); break;
        case 'm': size = perflab_parse_size(optarg); break;
        case 'w': mode = parse_mode(optarg); break;
        case 'd': seconds = atof(optarg); break;
        case 'i': interactive = 1; break;
        default: perflab_die("usage: neighbour -c CPU -m SIZE [-w MODE -d SECONDS] [-i]");
        }
    }
    if (cpu < 0 || size < CHUNK)
        perflab_die("neighbour: give the CPU with -c and a buffer of 2 MiB or more with -m (e.g. -c 0 -m 1G)");
    if (!interactive && seconds <= 0)
        perflab_die("neighbour: give -d SECONDS to run a mode, or -i to take modes on stdin");
    perflab_pin_self(cpu);
    size_t bytes = size / CHUNK * CHUNK;
    uint64_t *buffer = aligned_alloc(HUGE_PAGE, bytes);
    if (!buffer)
        perflab_die("neighbour: cannot allocate %zu MiB: give a smaller -m or free some memory", bytes >> 20);
    madvise(buffer, bytes, MADV_HUGEPAGE);
    memset(buffer, 1, bytes); /* resident from now on, whatever the mode */
    perflab_print_meta("neighbour");
    printf("{\"type\":\"params\",\"cpu\":%d,\"bytes\":%zu,\"pid\":%d}\n", cpu, bytes, (int)getpid());
    fflush(stdout);

    uint64_t start = perflab_now_ns(), written = 0, steps = 0, state = 0x9E3779B97F4A7C15u, pass = 0;
    uint64_t deadline = interactive ? UINT64_MAX : start + (uint64_t)(seconds * 1e9);
    size_t offset = 0;
    int announce = 0;
    char text[64];
    for (;;) {
        if (interactive && (mode == IDLE || order_waiting())) {
            if (!fgets(text, sizeof text, stdin))
                break;
            text[strcspn(text, "\n")] = 0;
            enum mode next = parse_mode(text);
            report(mode, perflab_now_ns() - start, written, steps);
            mode = next, written = steps = 0, announce = 1, start = perflab_now_ns();
        }
        if (mode == WRITE || mode == NT_WRITE) {
            (mode == WRITE ? write_chunk : nt_write_chunk)(buffer + offset / 8, CHUNK / 8, pass);
            written += CHUNK;
            offset += CHUNK;
            if (offset == bytes)
                offset = 0, pass++;
        } else if (mode == COMPUTE) {
            state = compute_chunk(state);
            steps += COMPUTE_STEPS;
        }
        if (announce) {
            printf("{\"type\":\"ready\",\"mode\":\"%s\"}\n", NAMES[mode]);
            fflush(stdout);
            announce = 0;
        }
        if (!interactive && perflab_now_ns() >= deadline)
            break;
    }
    report(mode, perflab_now_ns() - start, written, steps);
    printf("{\"type\":\"end\",\"state\":%llu}\n", (unsigned long long)(state ^ buffer[pass % (bytes / 8)]));
    return 0;
}
