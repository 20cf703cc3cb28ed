// hiredis's libevent adapter is a header of static functions, which Swift cannot call through a
// module; Peel's own adapter (the same events) also bounds what one reply may make it hold.
#ifndef CPEEL_REDIS_H
#define CPEEL_REDIS_H
#include <stddef.h>
#include <hiredis/async.h>

struct event_base;

/// Called on the loop thread when a reply still arriving already holds more than `max_reply`
/// unparsed bytes: reading has stopped, and the owner must drop the connection.
typedef void (*peel_redis_too_large_fn)(redisAsyncContext *ac);

/// Attaches `ac` to `base` like redisLibeventAttach, and bounds its replies: a reply whose bytes
/// waiting to be parsed exceed `max_reply` is never read further (`too_large` is called), and an
/// array reply fails the reader (Peel sends no command answered with an
/// array). REDIS_OK or REDIS_ERR.
int peel_redis_attach(redisAsyncContext *ac, struct event_base *base, size_t max_reply, peel_redis_too_large_fn too_large);
#endif
