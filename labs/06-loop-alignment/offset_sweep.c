/* offset_sweep: one loop, the same bytes, placed at different start offsets.
 *
 * Each copy of the loop is the same machine code (written in assembly so no
 * compiler can change it); only its address differs. Copy N starts N bytes
 * past a 256-byte boundary, so N mod 64 is where it starts in a 64-byte
 * instruction-cache line and N mod 32 where it starts in a 32-byte window of
 * the decoded-uop cache. Two loops:
 *   -l alu   six independent ALU instructions: one cycle per iteration when
 *            the front end keeps up, so any front-end penalty shows directly
 *   -l call  a call to an empty function plus a counter: the seed's program
 *
 * Each visit to an offset runs a short untimed call first (code into the
 * caches, branch predictors trained), then a timed one. Offsets are visited
 * round-robin; -r rotates the order, so drift hits every offset alike.
 * Overhead: one busy CPU for the whole run.
 *
 * usage: offset_sweep [-l alu|call] [-o OFFSETS] [-n ITERATIONS] [-s ROUNDS] [-r ROTATION] [-C CPU]
 *   OFFSETS is a list like 0-127 or 14,46 (each 0..127; default 0-127)
 */
#include "perflab_bench.h"
#include <unistd.h>

#define MAX_OFFSET 127 /* the .rept counts below make MAX_OFFSET + 1 copies */

/* The loops. `.p2align 8` then `.skip N` puts label 1 (the loop top) at
 * 256*k + N; the setup jumps over the padding, which is never executed. */
// ANCHOR: loops
__asm__(
    ".text\n"
    "empty_function: ret\n"

    ".macro alu_loop n\n"
    "alu_loop_\\n:\n"             /* uint64_t alu_loop_N(uint64_t iterations) */
    "  xor %eax, %eax\n"
    "  xor %ecx, %ecx\n"
    "  xor %edx, %edx\n"
    "  jmp 1f\n"
    "  .p2align 8, 0xcc\n"
    "  .if \\n\n"
    "  .skip \\n, 0xcc\n"
    "  .endif\n"
    "1:add %rcx, %rax\n"
    "  add $3, %rdx\n"
    "  xor %rcx, %rdx\n"
    "  add $1, %rcx\n"
    "  cmp %rdi, %rcx\n"
    "  jne 1b\n"                  /* cmp+jne fuse into one uop */
    "  add %rdx, %rax\n"
    "  ret\n"
    ".endm\n"

    ".macro call_loop n\n"
    "call_loop_\\n:\n"            /* uint64_t call_loop_N(uint64_t iterations) */
    "  xor %eax, %eax\n"
    "  xor %ecx, %ecx\n"
    "  jmp 1f\n"
    "  .p2align 8, 0xcc\n"
    "  .if \\n\n"
    "  .skip \\n, 0xcc\n"
    "  .endif\n"
    "1:call empty_function\n"
    "  add %rcx, %rax\n"
    "  add $1, %rcx\n"
    "  cmp %rdi, %rcx\n"
    "  jne 1b\n"
    "  ret\n"
    ".endm\n"

    /* MAX_OFFSET + 1 copies of each loop, and a table of their addresses */
    ".altmacro\n"
    ".set offset, 0\n"
    ".rept 128\n"
    "  alu_loop %offset\n"
    "  call_loop %offset\n"
    "  .set offset, offset + 1\n"
    ".endr\n"
    ".macro address_of kind, n\n"
    "  .quad \\kind\\()_loop_\\n\n"
    ".endm\n"
    ".section .data.rel.ro\n"
    ".p2align 3\n"
    "alu_loops:\n"
    ".set offset, 0\n"
    ".rept 128\n"
    "  address_of alu, %offset\n"
    "  .set offset, offset + 1\n"
    ".endr\n"
    "call_loops:\n"
    ".set offset, 0\n"
    ".rept 128\n"
    "  address_of call, %offset\n"
    "  .set offset, offset + 1\n"
    ".endr\n"
    ".noaltmacro\n"
    ".text\n");
// ANCHOR_END: loops

typedef uint64_t (*loop_fn)(uint64_t iterations);
extern const loop_fn alu_loops[MAX_OFFSET + 1], call_loops[MAX_OFFSET + 1];

/* Parse "0-127" or "14,46,100-103" into offsets[]; return how many. */
static int parse_offsets(const char *list, int *offsets)
{
    int count = 0;
    const char *p = list;
    while (*p) {
        char *end;
        long first = strtol(p, &end, 10), last = first;
        if (end == p)
            perflab_die("bad offset list '%s': use numbers and ranges like 0-127 or 14,46", list);
        if (*end == '-') {
            p = end + 1;
            last = strtol(p, &end, 10);
            if (end == p)
                perflab_die("bad offset list '%s': a range needs two ends, like 0-127", list);
        }
        if (first < 0 || last > MAX_OFFSET || first > last)
            perflab_die("offsets must be 0..%d in increasing ranges, got '%s'", MAX_OFFSET, list);
        for (long o = first; o <= last; o++) {
            if (count > MAX_OFFSET)
                perflab_die("at most %d offsets per run, got '%s'", MAX_OFFSET + 1, list);
            offsets[count++] = (int)o;
        }
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            perflab_die("bad offset list '%s': separate items with commas", list);
    }
    if (count == 0)
        perflab_die("no offsets given: use a list like 0-127");
    return count;
}

int main(int argc, char **argv)
{
    const char *loop = "alu", *offset_list = "0-127";
    long iterations = 1000000, rounds = 10, rotation = 0;
    int cpu = -1, opt;
    while ((opt = getopt(argc, argv, "l:o:n:s:r:C:")) != -1) {
        switch (opt) {
        case 'l': loop = optarg; break;
        case 'o': offset_list = optarg; break;
        case 'n': iterations = atol(optarg); break;
        case 's': rounds = atol(optarg); break;
        case 'r': rotation = atol(optarg); break;
        case 'C': cpu = atoi(optarg); break;
        default:
            perflab_die("usage: offset_sweep [-l alu|call] [-o OFFSETS] [-n ITERATIONS] [-s ROUNDS] [-r ROTATION] [-C CPU]");
        }
    }
    const loop_fn *table;
    if (strcmp(loop, "alu") == 0)
        table = alu_loops;
    else if (strcmp(loop, "call") == 0)
        table = call_loops;
    else
        perflab_die("unknown loop '%s': choose alu or call", loop);
    if (iterations < 1000 || rounds < 1)
        perflab_die("need at least 1000 iterations and 1 round, got -n %ld -s %ld", iterations, rounds);
    int offsets[MAX_OFFSET + 1];
    int count = parse_offsets(offset_list, offsets);
    if (cpu >= 0)
        perflab_pin_self(cpu);

    perflab_print_meta("offset_sweep");
    volatile uint64_t sink; /* keeps the calls from being dropped */
    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < count; i++) {
            int offset = offsets[(i + (r + rotation) * 7) % count]; /* a different order each round */
            sink = table[offset](iterations / 10);                  /* untimed warm-up */
            uint64_t start = perflab_now_ns();
            sink = table[offset](iterations);
            uint64_t elapsed = perflab_now_ns() - start;
            printf("{\"type\":\"sample\",\"loop\":\"%s\",\"offset\":%d,\"iterations\":%ld,"
                   "\"elapsed_ns\":%llu,\"ns_per_iter\":%.4f}\n",
                   loop, offset, iterations, (unsigned long long)elapsed, (double)elapsed / iterations);
        }
    }
    (void)sink;
    return 0;
}
