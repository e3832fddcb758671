/* page_arena.h: allocations the way jemalloc places large ones, with optional padding.
 *
 * jemalloc (FreeBSD's malloc) starts every large allocation on a page
 * boundary, so arrays of the same shape share every address bit below
 * bit 12. The source padded each allocation by a few bytes to break that:
 * allocation k starts k * padding bytes past its page, so padding compounds
 * (0, n, 2n, ...). (glibc's malloc, the source notes, does not page-align.)
 */
#ifndef PAGE_ARENA_H
#define PAGE_ARENA_H

#include "perflab_bench.h"
#include <sys/mman.h>

#define PAGE 4096

struct page_arena {
    char *base;
    size_t size, used;
    long padding;  /* bytes added per allocation, compounding */
    int count;     /* allocations so far */
};

/* An arena of `size` bytes whose allocation k starts k * padding bytes past a page boundary. */
static inline struct page_arena arena_new(size_t size, long padding)
{
    if (padding < 0 || padding > 1 << 20)
        perflab_die("padding must be 0..1048576 bytes, got %ld", padding);
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        perflab_die("cannot map %zu bytes: %s", size, strerror(errno));
    return (struct page_arena){base, size, 0, padding, 0};
}

// ANCHOR: alloc
/* `bytes` at the next page boundary, plus this allocation's share of the padding. */
static inline void *arena_alloc(struct page_arena *arena, size_t bytes)
{
    size_t start = arena->used + (size_t)arena->count * arena->padding;
    size_t pages = (start + bytes + PAGE - 1) / PAGE;
    if (pages * PAGE > arena->size)
        perflab_die("the arena's %zu bytes are used up", arena->size);
    arena->used = pages * PAGE;  /* the next allocation starts on the next page */
    arena->count++;
    return arena->base + start;
}
// ANCHOR_END: alloc

/* Where an allocation starts in its page: the address bits that 4 KiB aliasing compares. */
static inline unsigned page_offset(const void *p)
{
    return (unsigned)((uintptr_t)p % PAGE);
}

#endif
