/* The response: the session's tags, chosen by bits of its key. */
uint64_t build_response(struct worker *w, const struct request *r)
{
    char *out = w->response;
    out[0] = '\0';
    for (int i = 0; i < TAGS; i++)
        strcat(out, tag_names[(r->header >> (i % 61)) & 7]);
    return digest(out, strlen(out));
}
