// <sys/types.h> and <sys/select.h> must come before event2/: libevent's _GNU_SOURCE otherwise breaks fd_set.
#include <sys/types.h>
#include <sys/select.h>
#include <pthread.h>
#include <stdlib.h>
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include "CPeelRedis.h"

// hiredis's libevent adapter (hiredis/adapters/libevent.h, 0.14), with one change: before each
// read, the bytes of the reply still arriving are measured. hiredis buffers a bulk reply until it
// is whole and has no bound of its own (0.14 has no maxelements and `maxbuf` only frees idle
// buffer), so a store that answers with 100 MB would make every worker hold 100 MB.
typedef struct peel_redis_events {
    redisAsyncContext *context;
    struct event *rev, *wev;
    size_t max_reply;
    peel_redis_too_large_fn too_large;
} peel_redis_events;

static void peel_redis_read(int fd, short event, void *arg) {
    (void)fd; (void)event;
    peel_redis_events *e = arg;
    redisReader *r = e->context->c.reader;
    // Whole replies are parsed and handed over after every read, so what is left is the start of
    // one reply. Measured before reading on: at most `max_reply` plus one read (16 KiB) is held.
    if (r != NULL && r->len - r->pos > e->max_reply) {
        event_del(e->rev);
        e->too_large(e->context);
        return;
    }
    redisAsyncHandleRead(e->context);
}

static void peel_redis_write(int fd, short event, void *arg) {
    (void)fd; (void)event;
    peel_redis_events *e = arg;
    redisAsyncHandleWrite(e->context);
}

static void peel_redis_add_read(void *privdata) { peel_redis_events *e = privdata; event_add(e->rev, NULL); }
static void peel_redis_del_read(void *privdata) { peel_redis_events *e = privdata; event_del(e->rev); }
static void peel_redis_add_write(void *privdata) { peel_redis_events *e = privdata; event_add(e->wev, NULL); }
static void peel_redis_del_write(void *privdata) { peel_redis_events *e = privdata; event_del(e->wev); }

static void peel_redis_cleanup(void *privdata) {
    peel_redis_events *e = privdata;
    event_free(e->rev);
    event_free(e->wev);
    free(e);
}

// Reply objects as hiredis makes them, except arrays: Peel sends no command whose reply is one
// (AUTH, SELECT, PING, GETRANGE, SET, DEL), hiredis allocates an array's element table from its
// header alone (`*100000000` asks for 800 MB), and an array's elements are parsed into objects as
// they arrive, so nested arrays would escape the byte bound above. Returning NULL makes the reader
// fail ("Out of memory"), and hiredis drops the connection.
static redisReplyObjectFunctions peel_redis_defaults;
static redisReplyObjectFunctions peel_redis_functions;
static pthread_once_t peel_redis_once = PTHREAD_ONCE_INIT;
static int peel_redis_ready = 0;

static void *peel_redis_create_array(const redisReadTask *task, int elements) {
    (void)task; (void)elements;
    return NULL;
}

static void peel_redis_init(void) {
    redisReader *r = redisReaderCreate();
    if (r == NULL || r->fn == NULL || r->fn->createArray == NULL) {
        if (r != NULL) redisReaderFree(r);
        return;
    }
    peel_redis_defaults = *r->fn;
    redisReaderFree(r);
    peel_redis_functions = peel_redis_defaults;
    peel_redis_functions.createArray = peel_redis_create_array;
    peel_redis_ready = 1;
}

int peel_redis_attach(redisAsyncContext *ac, struct event_base *base, size_t max_reply, peel_redis_too_large_fn too_large) {
    redisContext *c = &ac->c;
    if (ac->ev.data != NULL || too_large == NULL || c->reader == NULL) return REDIS_ERR;
    if (pthread_once(&peel_redis_once, peel_redis_init) != 0 || !peel_redis_ready) return REDIS_ERR;
    peel_redis_events *e = calloc(1, sizeof(*e));
    if (e == NULL) return REDIS_ERR;
    e->context = ac;
    e->max_reply = max_reply;
    e->too_large = too_large;
    e->rev = event_new(base, c->fd, EV_READ, peel_redis_read, e);
    e->wev = event_new(base, c->fd, EV_WRITE, peel_redis_write, e);
    if (e->rev == NULL || e->wev == NULL) {
        if (e->rev != NULL) event_free(e->rev);
        if (e->wev != NULL) event_free(e->wev);
        free(e);
        return REDIS_ERR;
    }
    c->reader->fn = &peel_redis_functions;
    ac->ev.addRead = peel_redis_add_read;
    ac->ev.delRead = peel_redis_del_read;
    ac->ev.addWrite = peel_redis_add_write;
    ac->ev.delWrite = peel_redis_del_write;
    ac->ev.cleanup = peel_redis_cleanup;
    ac->ev.data = e;
    if (event_add(e->rev, NULL) != 0 || event_add(e->wev, NULL) != 0) return REDIS_ERR;
    return REDIS_OK;
}
