/* perflab_bench.h: the few helpers every perflab benchmark shares.
 *
 * Benchmarks print JSON lines on stdout: first one {"type":"meta",...} line
 * recording how the binary was built, then one {"type":"sample",...} line per
 * measurement. Errors go to stderr as one line, with exit code 2.
 */
#ifndef PERFLAB_BENCH_H
#define PERFLAB_BENCH_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef PERFLAB_CFLAGS
#define PERFLAB_CFLAGS "unknown"
#endif

/* The cache-line size to pad shared data to. 128, not 64: Intel's spatial
 * prefetcher fetches lines in pairs, which would couple neighbours. */
#define PERFLAB_LINE 128

static inline uint64_t perflab_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void perflab_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

/* Pin the calling thread to one CPU, or stop with a message that says why. */
static inline void perflab_pin_self(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int err = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (err)
        perflab_die("cannot pin to CPU %d: %s (is it online and in this process's cpuset?)", cpu, strerror(err));
}

/* A size in bytes with an optional K, M or G suffix ("32K", "512M"), or stop with a message. */
static inline size_t perflab_parse_size(const char *text)
{
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || end == text)
        perflab_die("bad size %s: give bytes, e.g. 32768 or 32K", text);
    int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : *end == 'G' || *end == 'g' ? 30 : 0;
    if (shift)
        end++;
    if (*end)
        perflab_die("bad size %s: the only suffixes are K, M and G", text);
    return (size_t)value << shift;
}

/* Copy a file, e.g. a snapshot of /proc/interrupts for the lab to parse, or stop with a message. */
static inline void perflab_copy_file(const char *from, const char *to)
{
    char buffer[1 << 16];
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0)
        perflab_die("cannot copy %s to %s: %s", from, to, strerror(errno));
    ssize_t n;
    while ((n = read(in, buffer, sizeof buffer)) > 0)
        if (write(out, buffer, n) != n)
            perflab_die("cannot write %s: %s", to, strerror(errno));
    close(in);
    close(out);
}

static inline int perflab_compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of n values (sorts them in place). */
static inline double perflab_median(double *values, long n)
{
    qsort(values, n, sizeof *values, perflab_compare_doubles);
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

static inline void perflab_print_meta(const char *bench)
{
    printf("{\"type\":\"meta\",\"bench\":\"%s\",\"compiler\":\"%s\",\"cflags\":\"%s\"}\n",
           bench, __VERSION__, PERFLAB_CFLAGS);
}

#endif
