// <sys/types.h> and <sys/select.h> must come before event2/: libevent's _GNU_SOURCE otherwise breaks fd_set.
#include <sys/types.h>
#include <sys/select.h>
#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include "CPeelRedis.h"

int peel_redis_attach(redisAsyncContext *ac, struct event_base *base) {
    return redisLibeventAttach(ac, base);
}
