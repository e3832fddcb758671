/* Traffic totals for the stats endpoint: one entry per worker, so no locks and no atomics. */
static struct {
    uint64_t requests, bytes, by_size[8];
} totals[MAX_THREADS];

void account(struct worker *w, const struct request *r)
{
    totals[w->id].requests++;
    totals[w->id].bytes += r->bytes;
    totals[w->id].by_size[(r->bytes - 64) >> 9]++;
}

uint64_t service_summary(void)
{
    uint64_t requests = 0, bytes = 0, by_size[8] = {0};
    for (int i = 0; i < MAX_THREADS; i++) {
        requests += totals[i].requests;
        bytes += totals[i].bytes;
        for (int s = 0; s < 8; s++)
            by_size[s] += totals[i].by_size[s];
    }
    uint64_t sum = requests * 1000003 + bytes;
    for (int i = 0; i < 8; i++)
        sum = sum * 31 + by_size[i];
    return sum;
}
