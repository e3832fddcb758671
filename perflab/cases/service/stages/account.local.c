/* Traffic totals for the stats endpoint: each worker counts its own, summed when asked. */
void account(struct worker *w, const struct request *r)
{
    w->requests++;
    w->bytes += r->bytes;
    w->by_size[(r->bytes - 64) >> 9]++;
}

uint64_t service_summary(void)
{
    uint64_t requests = 0, bytes = 0, by_size[8] = {0};
    for (int i = 0; i < MAX_THREADS; i++)
        if (workers[i]) {
            requests += workers[i]->requests;
            bytes += workers[i]->bytes;
            for (int s = 0; s < 8; s++)
                by_size[s] += workers[i]->by_size[s];
        }
    uint64_t sum = requests * 1000003 + bytes;
    for (int i = 0; i < 8; i++)
        sum = sum * 31 + by_size[i];
    return sum;
}
