/* seed: the program from the seed report, timed.
 *
 * A loop calls an empty function 100 million times and sums the counter.
 * Built with GCC 4.8.5 it ran in 2.06 s, with GCC 8.5.0 in 2.65 s: the newer
 * compiler put one more `nop` in foo, which shifted main's loop across a
 * 64-byte line. The lab builds this file with several compilers and flags
 * (-DEXTRA_NOP adds the nop) and measures every build in one interleaved run.
 *
 * usage: seed [ITERATIONS]    (default 100000000)
 */
#include "perflab_bench.h"

__attribute__((noinline)) void foo(void)
{
    __asm__ volatile(""); /* an empty body the optimiser must keep calling */
#ifdef EXTRA_NOP
    __asm__ volatile("nop");
#endif
}

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? atol(argv[1]) : 100000000;
    if (iterations < 1)
        perflab_die("usage: seed [ITERATIONS]; ITERATIONS must be positive, got '%s'", argv[1]);
    perflab_print_meta("seed");
    long sum = 0;
    uint64_t start = perflab_now_ns();
    // ANCHOR: loop
    for (long i = 0; i < iterations; i++) {
        foo();
        sum += i;
    }
    // ANCHOR_END: loop
    uint64_t elapsed = perflab_now_ns() - start;
    printf("{\"type\":\"sample\",\"iterations\":%ld,\"sum\":%ld,\"elapsed_ns\":%llu,\"ns_per_iter\":%.4f}\n",
           iterations, sum, (unsigned long long)elapsed, (double)elapsed / iterations);
    return 0;
}
