/* faults: what does one minor page fault cost?
 *
 * Each round maps PAGES pages, touches one byte of every page and unmaps
 * them, timing the touches and counting the minor faults they took
 * (getrusage's ru_minflt). Every fault walks the page tables from the top,
 * allocating what is missing, so a fifth level (la57) costs on every one.
 *
 *   anon  write faults on anonymous memory: one page, one fault, one PTE
 *         (huge pages are switched off for the mapping).
 *   file  read faults on a private mapping of a file in the page cache: the
 *         kernel maps up to fault_around_bytes (64 KiB, 16 pages) around the
 *         faulting page at once, so one fault covers many pages.
 *
 * With -H the mapping is asked for above 2^47, where only a 5-level kernel
 * can place it; the sample says where it landed ("high").
 * The first WARMUP rounds are run and not printed. One JSON line per round.
 * Under QEMU with -icount shift=0, the guest's clock counts instructions,
 * so elapsed_ns is then a count of instructions.
 *
 * usage: faults -m anon|file [-p PAGES] [-r ROUNDS] [-w WARMUP] [-f PATH] [-c CPU] [-H]
 * examples:
 *   faults -m anon                          # 4096 pages (16 MiB), 10 rounds
 *   faults -m file -f /tmp/faults.dat -r 30 # the file is made if missing
 *   faults -m anon -H -c 1                  # above 2^47 (5-level kernels), on CPU 1
 */
#include "perflab_bench.h"

#include <stdbool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>

#define PAGE 4096
#define HIGH_HINT ((uintptr_t)1 << 48) /* beyond 4-level paging's 2^47 bytes of user space */

static long minor_faults(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
}

/* A file of at least `bytes`, read once so that its pages are in the page cache. */
static int cached_file(const char *path, size_t bytes)
{
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0)
        perflab_die("cannot open %s: %s (give -f a writable path)", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size < bytes && ftruncate(fd, (off_t)bytes) != 0)
        perflab_die("cannot grow %s to %zu bytes: %s", path, bytes, strerror(errno));
    static char block[1 << 16];
    memset(block, 1, sizeof block);
    for (size_t done = 0; done < bytes; done += sizeof block)
        if (pwrite(fd, block, sizeof block, (off_t)done) != (ssize_t)sizeof block)
            perflab_die("cannot write %s: %s", path, strerror(errno));
    fsync(fd);
    return fd;
}

/* ANCHOR: round */
static void round_trip(bool file, int fd, size_t pages, bool high, uint64_t *elapsed, long *faults, uintptr_t *where)
{
    size_t bytes = pages * PAGE;
    void *hint = high ? (void *)HIGH_HINT : NULL;
    char *map = file ? mmap(hint, bytes, PROT_READ, MAP_PRIVATE, fd, 0)
                     : mmap(hint, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        perflab_die("mmap of %zu pages failed: %s (try fewer with -p)", pages, strerror(errno));
    if (!file)
        madvise(map, bytes, MADV_NOHUGEPAGE); /* one 4 KiB page per fault, not 2 MiB */
    volatile char sink = 0;
    long before = minor_faults();
    uint64_t start = perflab_now_ns();
    for (size_t i = 0; i < pages; i++) {
        if (file)
            sink += map[i * PAGE];
        else
            map[i * PAGE] = (char)i;
    }
    *elapsed = perflab_now_ns() - start;
    *faults = minor_faults() - before;
    *where = (uintptr_t)map;
    (void)sink;
    munmap(map, bytes);
}
/* ANCHOR_END: round */

int main(int argc, char **argv)
{
    const char *mode = NULL, *path = "/tmp/perflab-faults.dat";
    long pages = 4096, rounds = 10, warmup = 2;
    int cpu = -1;
    bool high = false;
    for (int c; (c = getopt(argc, argv, "m:p:r:w:f:c:H")) != -1;) {
        switch (c) {
        case 'm': mode = optarg; break;
        case 'p': pages = atol(optarg); break;
        case 'r': rounds = atol(optarg); break;
        case 'w': warmup = atol(optarg); break;
        case 'f': path = optarg; break;
        case 'c': cpu = atoi(optarg); break;
        case 'H': high = true; break;
        default: perflab_die("usage: faults -m anon|file [-p PAGES] [-r ROUNDS] [-w WARMUP] [-f PATH] [-c CPU] [-H]");
        }
    }
    if (!mode || (strcmp(mode, "anon") && strcmp(mode, "file")))
        perflab_die("give -m anon (write faults, one page each) or -m file (read faults, with fault-around)");
    if (pages < 1 || pages > (1L << 20))
        perflab_die("-p %ld: give 1 to 1048576 pages (4 GiB)", pages);
    if (rounds < 1 || warmup < 0)
        perflab_die("-r %ld -w %ld: give at least one round and no negative warm-up", rounds, warmup);
    if (cpu >= 0)
        perflab_pin_self(cpu);
    bool file = !strcmp(mode, "file");
    int fd = file ? cached_file(path, (size_t)pages * PAGE) : -1;

    perflab_print_meta("faults");
    for (long r = -warmup; r < rounds; r++) {
        uint64_t elapsed;
        long faults;
        uintptr_t where;
        round_trip(file, fd, (size_t)pages, high, &elapsed, &faults, &where);
        if (r >= 0)
            printf("{\"type\":\"sample\",\"mode\":\"%s\",\"round\":%ld,\"pages\":%ld,\"minflt\":%ld,"
                   "\"elapsed_ns\":%llu,\"high\":%s}\n", mode, r, pages, faults,
                   (unsigned long long)elapsed, where >= ((uintptr_t)1 << 47) ? "true" : "false");
    }
    if (fd >= 0)
        close(fd);
    return 0;
}
