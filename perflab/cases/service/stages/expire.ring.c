/* The queue is a ring: the oldest session is at `head`. */
static void remember(struct worker *w, uint32_t key, uint64_t at)
{
    w->queue[(w->head + w->queued++) & (QUEUE_SIZE - 1)] = (struct born){key, at};
}

void expire_sessions(struct worker *w)
{
    while (w->queued > 0 && w->clock - w->queue[w->head].at >= SESSION_AGE) {
        struct born *oldest = &w->queue[w->head];
        struct session *s = &w->table[oldest->key & (TABLE_SIZE - 1)];
        if (s->key == oldest->key && s->born == oldest->at)
            s->key = EMPTY;
        w->head = (w->head + 1) & (QUEUE_SIZE - 1);
        w->queued--;
    }
}
