/* stencil: a himeno-like Jacobi stencil over arrays placed the way jemalloc places them.
 *
 * The himeno benchmark (himenobmtxpa) solves a Poisson equation with a
 * 19-point Jacobi stencil over seven matrices: a (4 planes), b (3), c (3),
 * p, bnd, wrk1 and wrk2, each one malloc'd. This is its kernel, at its
 * smallest size (33 x 33 x 65 points per plane, 34 floating-point operations
 * per point), over matrices from page_arena.h: each starts on a page, plus
 * PADDING bytes per allocation, compounding.
 *
 * With no padding, p and wrk2 start at the same offset in their pages, so
 * every load of p[i][j][k-1] meets the store to wrk2[i][j][k-1] of the
 * previous point in bits 11:0 of its address: 4 KiB aliasing, once per point.
 *
 * Each repeat runs SWEEPS timed Jacobi sweeps (after one untimed) and prints
 * one sample with its MFLOPS, as himeno counts them. Overhead: one busy CPU.
 *
 * usage: stencil [-p PADDING] [-n SWEEPS] [-s REPEATS] [-C CPU]
 */
#include "perflab_bench.h"
#include "page_arena.h"

#define ROWS 33
#define COLS 33
#define DEPS 65
#define FLOPS_PER_POINT 34.0

typedef struct {
    float *m;
    int planes;
} Matrix;

#define AT(M, n, i, j, k) (M).m[(((size_t)(n) * ROWS + (i)) * COLS + (j)) * DEPS + (k)]

static Matrix new_matrix(struct page_arena *arena, int planes, float value)
{
    Matrix matrix = {arena_alloc(arena, sizeof(float) * planes * ROWS * COLS * DEPS), planes};
    for (size_t e = 0; e < (size_t)planes * ROWS * COLS * DEPS; e++)
        matrix.m[e] = value;
    return matrix;
}

struct problem {
    Matrix a, b, c, p, bnd, wrk1, wrk2;
};

// ANCHOR: jacobi
static float jacobi(struct problem *s, int sweeps)
{
    const float omega = 0.8f;
    float gosa = 0;
    for (int n = 0; n < sweeps; n++) {
        gosa = 0;
        for (int i = 1; i < ROWS - 1; i++)
            for (int j = 1; j < COLS - 1; j++)
                for (int k = 1; k < DEPS - 1; k++) {
                    float s0 = AT(s->a, 0, i, j, k) * AT(s->p, 0, i + 1, j, k)
                             + AT(s->a, 1, i, j, k) * AT(s->p, 0, i, j + 1, k)
                             + AT(s->a, 2, i, j, k) * AT(s->p, 0, i, j, k + 1)
                             + AT(s->b, 0, i, j, k) * (AT(s->p, 0, i + 1, j + 1, k) - AT(s->p, 0, i + 1, j - 1, k)
                                                     - AT(s->p, 0, i - 1, j + 1, k) + AT(s->p, 0, i - 1, j - 1, k))
                             + AT(s->b, 1, i, j, k) * (AT(s->p, 0, i, j + 1, k + 1) - AT(s->p, 0, i, j - 1, k + 1)
                                                     - AT(s->p, 0, i, j + 1, k - 1) + AT(s->p, 0, i, j - 1, k - 1))
                             + AT(s->b, 2, i, j, k) * (AT(s->p, 0, i + 1, j, k + 1) - AT(s->p, 0, i - 1, j, k + 1)
                                                     - AT(s->p, 0, i + 1, j, k - 1) + AT(s->p, 0, i - 1, j, k - 1))
                             + AT(s->c, 0, i, j, k) * AT(s->p, 0, i - 1, j, k)
                             + AT(s->c, 1, i, j, k) * AT(s->p, 0, i, j - 1, k)
                             + AT(s->c, 2, i, j, k) * AT(s->p, 0, i, j, k - 1)
                             + AT(s->wrk1, 0, i, j, k);
                    float ss = (s0 * AT(s->a, 3, i, j, k) - AT(s->p, 0, i, j, k)) * AT(s->bnd, 0, i, j, k);
                    gosa += ss * ss;
                    AT(s->wrk2, 0, i, j, k) = AT(s->p, 0, i, j, k) + omega * ss;
                }
        for (int i = 1; i < ROWS - 1; i++)
            for (int j = 1; j < COLS - 1; j++)
                for (int k = 1; k < DEPS - 1; k++)
                    AT(s->p, 0, i, j, k) = AT(s->wrk2, 0, i, j, k);
    }
    return gosa;
}
// ANCHOR_END: jacobi

/* himeno's initial values: a = 1 but a[3] = 1/6, b = 0, c = 1, bnd = 1, wrk = 0, p rising with i^2. */
static struct problem new_problem(struct page_arena *arena)
{
    struct problem s;
    s.p = new_matrix(arena, 1, 0);  /* allocated in himenobmtxpa's order */
    s.bnd = new_matrix(arena, 1, 1);
    s.wrk1 = new_matrix(arena, 1, 0);
    s.wrk2 = new_matrix(arena, 1, 0);
    s.a = new_matrix(arena, 4, 1);
    s.b = new_matrix(arena, 3, 0);
    s.c = new_matrix(arena, 3, 1);
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++)
            for (int k = 0; k < DEPS; k++) {
                AT(s.a, 3, i, j, k) = 1.0f / 6;
                AT(s.p, 0, i, j, k) = (float)(i * i) / ((ROWS - 1) * (ROWS - 1));
            }
    return s;
}

int main(int argc, char **argv)
{
    long padding = 0, sweeps = 20, repeats = 5;
    int cpu = -1, opt;
    opterr = 0; /* our one-line usage instead of getopt's own message */
    while ((opt = getopt(argc, argv, "p:n:s:C:")) != -1) {
        switch (opt) {
        case 'p': padding = atol(optarg); break;
        case 'n': sweeps = atol(optarg); break;
        case 's': repeats = atol(optarg); break;
        case 'C': cpu = atoi(optarg); break;
        default: perflab_die("usage: stencil [-p PADDING] [-n SWEEPS] [-s REPEATS] [-C CPU]");
        }
    }
    if (sweeps < 1 || repeats < 1)
        perflab_die("need at least 1 sweep and 1 repeat, got -n %ld -s %ld", sweeps, repeats);
    if (cpu >= 0)
        perflab_pin_self(cpu);
    struct page_arena arena = arena_new(32 << 20, padding);
    struct problem s = new_problem(&arena);
    perflab_print_meta("stencil");
    printf("{\"type\":\"layout\",\"padding\":%ld,\"points_per_sweep\":%d,\"page_offsets\":{\"p\":%u,\"bnd\":%u,\"wrk1\":%u,\"wrk2\":%u,"
           "\"a\":%u,\"b\":%u,\"c\":%u}}\n", padding, (ROWS - 2) * (COLS - 2) * (DEPS - 2), page_offset(s.p.m), page_offset(s.bnd.m),
           page_offset(s.wrk1.m), page_offset(s.wrk2.m), page_offset(s.a.m), page_offset(s.b.m), page_offset(s.c.m));
    volatile float gosa = jacobi(&s, 1); /* untimed: caches and page tables warm */
    double points = (double)(ROWS - 2) * (COLS - 2) * (DEPS - 2) * sweeps;
    for (long r = 0; r < repeats; r++) {
        uint64_t start = perflab_now_ns();
        gosa = jacobi(&s, (int)sweeps);
        uint64_t elapsed = perflab_now_ns() - start;
        printf("{\"type\":\"sample\",\"padding\":%ld,\"sweeps\":%ld,\"elapsed_ns\":%llu,\"mflops\":%.2f,"
               "\"gosa\":%g}\n", padding, sweeps, (unsigned long long)elapsed,
               FLOPS_PER_POINT * points / elapsed * 1e3, (double)gosa);
    }
    return 0;
}
