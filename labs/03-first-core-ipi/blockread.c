/* blockread: where do the completions of this CPU's reads run?
 *
 * Reads READS random 4 KiB blocks of PATH with O_DIRECT (no page cache: every
 * read goes to the device and comes back as a completion) from a thread
 * pinned to CPU S, one at a time. The device's interrupt arrives where its
 * IRQ affinity says; the block layer then finishes the request there or
 * sends it to another CPU with a function-call IPI, as the disk's
 * queue/rq_affinity says. Which CPU ran the completion shows in the BLOCK
 * row of /proc/softirqs and the CAL row of /proc/interrupts: both files are
 * copied to PREFIX.softirqs.before/.after and PREFIX.interrupts.before/.after
 * around the loop. One JSON line: reads, bytes and time.
 *
 * usage: blockread -c CPU -f PATH -i PREFIX [-n READS]
 *   PATH: a block device, or a file of at least 1 MiB on one
 * examples:
 *   blockread -c 0 -f /var/tmp/scratch -i /tmp/block       # 2000 reads from CPU 0
 *   blockread -c 2 -f /dev/vdb -i /tmp/block -n 10000       # a VM's scratch disk
 */
#include "perflab_bench.h"

#define BLOCK 4096

static void snapshot(const char *prefix, const char *when)
{
    char to[4096];
    snprintf(to, sizeof to, "%s.softirqs.%s", prefix, when);
    perflab_copy_file("/proc/softirqs", to);
    snprintf(to, sizeof to, "%s.interrupts.%s", prefix, when);
    perflab_copy_file("/proc/interrupts", to);
}
int main(int argc, char **argv)
{
    const char *path = NULL, *prefix = NULL;
    int cpu = -1;
    long reads = 2000;
    for (int c; (c = getopt(argc, argv, "c:f:i:n:")) != -1;) {
        switch (c) {
        case 'c': cpu = atoi(optarg); break;
        case 'f': path = optarg; break;
        case 'i': prefix = optarg; break;
        case 'n': reads = atol(optarg); break;
        default: perflab_die("usage: blockread -c CPU -f PATH -i PREFIX [-n READS]");
        }
    }
    if (cpu < 0 || !path || !prefix)
        perflab_die("blockread needs -c CPU, -f PATH and -i PREFIX");
    if (reads < 1)
        perflab_die("-n %ld: give at least one read", reads);
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd < 0)
        perflab_die("cannot open %s with O_DIRECT: %s", path, strerror(errno));
    off_t size = lseek(fd, 0, SEEK_END); /* works for files and block devices alike */
    if (size < (1 << 20))
        perflab_die("%s has %lld bytes: give a block device or a file of at least 1 MiB", path, (long long)size);
    void *buffer;
    if (posix_memalign(&buffer, BLOCK, BLOCK))
        perflab_die("out of memory");
    perflab_pin_self(cpu);

    uint64_t blocks = size / BLOCK, state = 0x9E3779B97F4A7C15u;
    snapshot(prefix, "before");
    uint64_t start = perflab_now_ns();
    for (long i = 0; i < reads; i++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        if (pread(fd, buffer, BLOCK, (off_t)(state % blocks) * BLOCK) != BLOCK)
            perflab_die("read of %s failed: %s", path, strerror(errno));
    }
    uint64_t elapsed = perflab_now_ns() - start;
    snapshot(prefix, "after");

    perflab_print_meta("blockread");
    printf("{\"type\":\"sample\",\"cpu\":%d,\"reads\":%ld,\"bytes\":%ld,\"elapsed_ns\":%llu}\n",
           cpu, reads, reads * BLOCK, (unsigned long long)elapsed);
    return 0;
}
