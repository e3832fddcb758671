/* The interface between sessiond's harness (harness.c: threads, batches, timing, the report) and its stages
   (service.c). The harness passes each request through the stages in this order. */
#ifndef SESSIOND_SERVICE_H
#define SESSIOND_SERVICE_H

#include <stdint.h>

#define MAX_THREADS 64

struct request {
    uint64_t id;     /* the request's number, 0 to --requests - 1 */
    uint32_t key;    /* the client's session key */
    uint32_t bytes;  /* the request's size */
    uint64_t header; /* parse_request's decoding of the above */
};

struct worker;

struct worker *worker_new(int id);                               /* called on the worker's own thread */
void parse_request(struct worker *w, struct request *r);
void find_session(struct worker *w, const struct request *r);
void account(struct worker *w, const struct request *r);
void expire_sessions(struct worker *w);                           /* after each request */
uint64_t build_response(struct worker *w, const struct request *r); /* a digest of the response's bytes */
uint64_t service_summary(void);                                   /* after every worker has finished */

#endif
