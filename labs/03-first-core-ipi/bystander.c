/* bystander: does another thread's memory-map change interrupt this CPU?
 *
 * A victim spins on CPU V and records every gap in its own timeline longer
 * than THRESHOLD ns (as oslat does): time it did not run, because the CPU
 * took an interrupt or ran something else. An aggressor on CPU A repeats one
 * operation OPS times:
 *
 *   munmap      mmap a page, write it, munmap it: the unmapped page may still
 *               be in the TLB of every CPU that ran this process
 *   mprotect    make a written page read-only and writable again: the same
 *   membarrier  MEMBARRIER_CMD_PRIVATE_EXPEDITED: a memory barrier on every
 *               CPU running a thread of this process
 *
 * With -p shared the victim is a thread of the aggressor's process, so the
 * kernel must tell CPU V (a TLB shootdown or a function-call IPI). With
 * -p separate the victim is another process: the control, which nothing
 * should interrupt.
 *
 * The aggressor copies /proc/interrupts to PREFIX.before and PREFIX.after
 * around its loop, while the victim is spinning, so the per-CPU deltas of the
 * TLB and CAL rows count this loop and little else. One JSON line: the
 * aggressor's operations and time, the victim's gaps in the same window.
 *
 * usage: bystander -v VICTIM_CPU -a AGGRESSOR_CPU -i PREFIX
 *                  [-o munmap|mprotect|membarrier] [-p shared|separate]
 *                  [-n OPS] [-t THRESHOLD_NS]
 * examples:
 *   bystander -v 0 -a 1 -i /tmp/irq                 # 20000 munmaps, victim a thread
 *   bystander -v 0 -a 1 -i /tmp/irq -p separate     # the control
 *   bystander -v 2 -a 3 -i /tmp/irq -o membarrier -n 5000
 */
#include "perflab_bench.h"
#include <linux/membarrier.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

enum phase { STARTING, SPINNING, MEASURING, DONE };

/* Shared with the victim, also across fork(): a MAP_SHARED page that is not
 * unmapped during the measurement, so it adds no shootdowns of its own. */
struct shared {
    _Atomic int phase;
    uint64_t gaps, gap_ns, max_gap_ns; /* written by the victim, read after DONE */
    char pad[PERFLAB_LINE];
};

static struct shared *shared;
static int victim_cpu;
static uint64_t threshold_ns = 1000;

// ANCHOR: victim
static void spin_and_record_gaps(void)
{
    perflab_pin_self(victim_cpu);
    atomic_store(&shared->phase, SPINNING);
    uint64_t gaps = 0, gap_ns = 0, max_gap_ns = 0, last = perflab_now_ns();
    int phase;
    while ((phase = atomic_load_explicit(&shared->phase, memory_order_relaxed)) != DONE) {
        uint64_t now = perflab_now_ns(), gap = now - last;
        last = now;
        if (phase == MEASURING && gap > threshold_ns) {
            gaps++;
            gap_ns += gap;
            max_gap_ns = gap > max_gap_ns ? gap : max_gap_ns;
        }
    }
    shared->gaps = gaps, shared->gap_ns = gap_ns, shared->max_gap_ns = max_gap_ns;
}
// ANCHOR_END: victim

static void *victim_thread(void *unused)
{
    (void)unused;
    spin_and_record_gaps();
    return NULL;
}

// ANCHOR: aggressor
static void one_operation(const char *op, volatile char *page, long page_size)
{
    if (!strcmp(op, "munmap")) {
        char *p = mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            perflab_die("mmap failed: %s", strerror(errno));
        p[0] = 1; /* a page in the TLB: munmap must flush it everywhere this mm ran */
        munmap(p, page_size);
    } else if (!strcmp(op, "mprotect")) {
        mprotect((void *)page, page_size, PROT_READ); /* fewer rights: stale writable entries must go */
        mprotect((void *)page, page_size, PROT_READ | PROT_WRITE);
        page[0]++;
    } else {
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    }
}
// ANCHOR_END: aggressor

int main(int argc, char **argv)
{
    const char *op = "munmap", *process = "shared", *prefix = NULL;
    int aggressor_cpu = -1;
    long ops = 20000;
    victim_cpu = -1;
    for (int c; (c = getopt(argc, argv, "v:a:o:p:n:t:i:")) != -1;) {
        switch (c) {
        case 'v': victim_cpu = atoi(optarg); break;
        case 'a': aggressor_cpu = atoi(optarg); break;
        case 'o': op = optarg; break;
        case 'p': process = optarg; break;
        case 'n': ops = atol(optarg); break;
        case 't': threshold_ns = strtoull(optarg, NULL, 10); break;
        case 'i': prefix = optarg; break;
        default: perflab_die("usage: bystander -v VICTIM_CPU -a AGGRESSOR_CPU -i PREFIX [-o munmap|mprotect|membarrier] "
                             "[-p shared|separate] [-n OPS] [-t THRESHOLD_NS]");
        }
    }
    if (victim_cpu < 0 || aggressor_cpu < 0 || !prefix)
        perflab_die("bystander needs -v VICTIM_CPU, -a AGGRESSOR_CPU and -i PREFIX");
    if (victim_cpu == aggressor_cpu)
        perflab_die("the victim and the aggressor must be on different CPUs, not both on %d", victim_cpu);
    if (strcmp(op, "munmap") && strcmp(op, "mprotect") && strcmp(op, "membarrier"))
        perflab_die("unknown operation %s: munmap, mprotect or membarrier", op);
    if (strcmp(process, "shared") && strcmp(process, "separate"))
        perflab_die("unknown -p %s: shared (victim is a thread of this process) or separate (another process)", process);
    if (ops < 1)
        perflab_die("-n %ld: give at least one operation", ops);
    if (!strcmp(op, "membarrier") && syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0))
        perflab_die("membarrier registration failed: %s (the kernel needs CONFIG_MEMBARRIER, 4.14 or later)", strerror(errno));

    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    long page_size = sysconf(_SC_PAGESIZE);
    volatile char *page = mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED || page == MAP_FAILED)
        perflab_die("mmap failed: %s", strerror(errno));
    page[0] = 0;
    perflab_pin_self(aggressor_cpu);

    pthread_t thread;
    pid_t child = -1;
    if (!strcmp(process, "shared")) {
        if (pthread_create(&thread, NULL, victim_thread, NULL))
            perflab_die("cannot start the victim thread");
    } else if ((child = fork()) == 0) {
        spin_and_record_gaps();
        _exit(0);
    } else if (child < 0) {
        perflab_die("fork failed: %s", strerror(errno));
    }
    while (atomic_load(&shared->phase) != SPINNING)
        ;
    usleep(20000); /* let the victim's start-up (faults, migration) settle */

    char before[4096], after[4096];
    snprintf(before, sizeof before, "%s.before", prefix);
    snprintf(after, sizeof after, "%s.after", prefix);
    perflab_copy_file("/proc/interrupts", before);
    atomic_store(&shared->phase, MEASURING);
    uint64_t start = perflab_now_ns();
    for (long i = 0; i < ops; i++)
        one_operation(op, page, page_size);
    uint64_t elapsed = perflab_now_ns() - start;
    atomic_store(&shared->phase, STARTING); /* stop counting gaps before the copy's own work */
    perflab_copy_file("/proc/interrupts", after);
    atomic_store(&shared->phase, DONE);
    if (child > 0)
        waitpid(child, NULL, 0);
    else
        pthread_join(thread, NULL);

    perflab_print_meta("bystander");
    printf("{\"type\":\"sample\",\"op\":\"%s\",\"process\":\"%s\",\"victim_cpu\":%d,\"aggressor_cpu\":%d,"
           "\"ops\":%ld,\"elapsed_ns\":%llu,\"threshold_ns\":%llu,\"victim_gaps\":%llu,\"victim_gap_ns\":%llu,"
           "\"victim_max_gap_ns\":%llu}\n",
           op, process, victim_cpu, aggressor_cpu, ops, (unsigned long long)elapsed,
           (unsigned long long)threshold_ns, (unsigned long long)shared->gaps,
           (unsigned long long)shared->gap_ns, (unsigned long long)shared->max_gap_ns);
    return 0;
}
