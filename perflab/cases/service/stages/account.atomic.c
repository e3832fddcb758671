/* Traffic totals for the stats endpoint: atomic, so every worker can add to them. */
static struct {
    _Atomic uint64_t requests, bytes, by_size[8];
} totals;

void account(struct worker *w, const struct request *r)
{
    (void)w;
    atomic_fetch_add_explicit(&totals.requests, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&totals.bytes, r->bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&totals.by_size[(r->bytes - 64) >> 9], 1, memory_order_relaxed);
}

uint64_t service_summary(void)
{
    uint64_t sum = totals.requests * 1000003 + totals.bytes;
    for (int i = 0; i < 8; i++)
        sum = sum * 31 + totals.by_size[i];
    return sum;
}
