/* emphasis: a speech front end's first step, over buffers from a page arena: the exercise's program.
 *
 * Pre-emphasis lifts the high frequencies of each block of audio samples:
 *     out[i] = in[i] - 0.97 * in[i-1]
 * The two buffers come from page_arena.h, `in` first. With no offset both
 * start on a page, and the load of in[i-1] meets the store to out[i-1] of
 * the step before in bits 11:0 of its address.
 * Your fix is the offset per allocation (-o); its C is not yours to change.
 *
 * Each repeat filters the block REPEATS times (after one untimed pass) and
 * prints one sample. Overhead: one busy CPU.
 *
 * usage: emphasis [-o OFFSET] [-n REPEATS] [-s SAMPLES] [-C CPU]
 */
#include "perflab_bench.h"
#include "page_arena.h"

#define BLOCK 2048 /* floats: 8 KiB per buffer, both in L1 */

// ANCHOR: filter
__attribute__((noinline, optimize("no-tree-vectorize")))
static void emphasise(float *out, const float *in)
{
    for (int i = 1; i < BLOCK; i++)
        out[i] = in[i] - 0.97f * in[i - 1];
}
// ANCHOR_END: filter

int main(int argc, char **argv)
{
    long offset = 0, repeats = 500, samples = 5;
    int cpu = -1, opt;
    opterr = 0; /* our one-line usage instead of getopt's own message */
    while ((opt = getopt(argc, argv, "o:n:s:C:")) != -1) {
        switch (opt) {
        case 'o': offset = atol(optarg); break;
        case 'n': repeats = atol(optarg); break;
        case 's': samples = atol(optarg); break;
        case 'C': cpu = atoi(optarg); break;
        default: perflab_die("usage: emphasis [-o OFFSET] [-n REPEATS] [-s SAMPLES] [-C CPU]");
        }
    }
    if (repeats < 1 || samples < 1)
        perflab_die("need at least 1 repeat and 1 sample, got -n %ld -s %ld", repeats, samples);
    if (cpu >= 0)
        perflab_pin_self(cpu);
    struct page_arena arena = arena_new(1 << 20, offset);
    float *in = arena_alloc(&arena, BLOCK * sizeof(float));
    float *out = arena_alloc(&arena, BLOCK * sizeof(float));
    for (int i = 0; i < BLOCK; i++)
        in[i] = (float)((i * 37) % 101) / 101;
    perflab_print_meta("emphasis");
    printf("{\"type\":\"layout\",\"offset\":%ld,\"page_offsets\":{\"in\":%u,\"out\":%u}}\n",
           offset, page_offset(in), page_offset(out));
    emphasise(out, in); /* untimed warm-up */
    for (long s = 0; s < samples; s++) {
        uint64_t start = perflab_now_ns();
        for (long r = 0; r < repeats; r++)
            emphasise(out, in);
        uint64_t elapsed = perflab_now_ns() - start;
        printf("{\"type\":\"sample\",\"offset\":%ld,\"elapsed_ns\":%llu,\"ns_per_element\":%.5f,\"check\":%g}\n",
               offset, (unsigned long long)elapsed, (double)elapsed / ((double)repeats * (BLOCK - 1)), out[BLOCK / 2]);
    }
    return 0;
}
