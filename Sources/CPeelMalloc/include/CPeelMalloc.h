// jemalloc's compiled-in options for the peel executable (see malloc_conf.c); nothing else.
#ifndef CPEEL_MALLOC_H
#define CPEEL_MALLOC_H
extern const char *malloc_conf;
#endif
