/* The oldest session is always at the front of the queue. */
static void remember(struct worker *w, uint32_t key, uint64_t at)
{
    w->queue[w->queued++] = (struct born){key, at};
}

void expire_sessions(struct worker *w)
{
    while (w->queued > 0 && w->clock - w->queue[0].at >= SESSION_AGE) {
        struct session *s = &w->table[w->queue[0].key & (TABLE_SIZE - 1)];
        if (s->key == w->queue[0].key && s->born == w->queue[0].at)
            s->key = EMPTY;
        w->queued--;
        memmove(w->queue, w->queue + 1, w->queued * sizeof *w->queue);
    }
}
