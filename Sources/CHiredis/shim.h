// hiredis (Debian libhiredis-dev): the async API Peel drives on each worker's libevent loop.
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
