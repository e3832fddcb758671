/* checksum: the exercise's program. Its speed depends only on where the
 * build puts one loop; its C logic is not yours to change.
 *
 * PADDING bytes of `nop` (executed once per call) sit between the function's
 * entry and the loop, so the build decides where the loop starts. The
 * exercise's slow build picks the PADDING that puts the loop across a
 * 64-byte line for the compiler you have. Fix it with build flags only.
 *
 * usage: checksum [ITERATIONS]    (default 100000000)
 */
#include "perflab_bench.h"

#ifndef PADDING
#define PADDING 0
#endif
#define STRINGIFY(x) #x
#define AS_STRING(x) STRINGIFY(x)

// ANCHOR: checksum
__attribute__((noinline, aligned(64))) uint64_t checksum(uint64_t n)
{
    uint64_t sum = 0, mixed = 0;
    __asm__ volatile(".if " AS_STRING(PADDING) "\n.skip " AS_STRING(PADDING) ", 0x90\n.endif");
    for (uint64_t i = 0; i < n; i++) {
        sum += i;
        mixed ^= sum + 3;
    }
    return sum ^ mixed;
}
// ANCHOR_END: checksum

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? atol(argv[1]) : 100000000;
    if (iterations < 1)
        perflab_die("usage: checksum [ITERATIONS]; ITERATIONS must be positive, got '%s'", argv[1]);
    perflab_print_meta("checksum");
    volatile uint64_t result = checksum((uint64_t)iterations / 10); /* warm-up */
    uint64_t start = perflab_now_ns();
    result = checksum((uint64_t)iterations);
    uint64_t elapsed = perflab_now_ns() - start;
    printf("{\"type\":\"sample\",\"iterations\":%ld,\"checksum\":%llu,\"elapsed_ns\":%llu,\"ns_per_iter\":%.4f}\n",
           iterations, (unsigned long long)result, (unsigned long long)elapsed, (double)elapsed / iterations);
    return 0;
}
