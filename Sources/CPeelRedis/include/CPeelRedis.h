// hiredis's libevent adapter is a header of static functions, which Swift cannot call through a
// module: this one wrapper attaches an async context to a worker's event_base.
#ifndef CPEEL_REDIS_H
#define CPEEL_REDIS_H
#include <hiredis/async.h>

struct event_base;

/// Attaches `ac` to `base` (redisLibeventAttach): REDIS_OK or REDIS_ERR.
int peel_redis_attach(redisAsyncContext *ac, struct event_base *base);
#endif
