// Typed, non-variadic wrappers for libcurl's variadic calls. Swift cannot call C variadics;
// this header holds those wrappers and nothing else.
#ifndef CPEEL_SHIMS_H
#define CPEEL_SHIMS_H
#include <curl/curl.h>

CURLcode peel_easy_setopt_long(CURL *easy, CURLoption option, long value);
CURLcode peel_easy_setopt_ptr(CURL *easy, CURLoption option, const void *value);
CURLcode peel_easy_setopt_off(CURL *easy, CURLoption option, curl_off_t value);
CURLcode peel_easy_setopt_write_cb(CURL *easy, CURLoption option,
                                   size_t (*cb)(char *, size_t, size_t, void *));
CURLcode peel_easy_setopt_seek_cb(CURL *easy, int (*cb)(void *, curl_off_t, int));
CURLcode peel_easy_setopt_close_cb(CURL *easy, int (*cb)(void *, curl_socket_t));
CURLcode peel_easy_setopt_open_cb(CURL *easy,
                                  curl_socket_t (*cb)(void *, curlsocktype, struct curl_sockaddr *));
CURLcode peel_easy_setopt_prereq_cb(CURL *easy, int (*cb)(void *, char *, char *, int, int));

CURLMcode peel_multi_setopt_long(CURLM *multi, CURLMoption option, long value);
CURLMcode peel_multi_setopt_ptr(CURLM *multi, CURLMoption option, void *value);
CURLMcode peel_multi_setopt_socket_cb(CURLM *multi,
                                      int (*cb)(CURL *, curl_socket_t, int, void *, void *));
CURLMcode peel_multi_setopt_timer_cb(CURLM *multi, int (*cb)(CURLM *, long, void *));

CURLcode peel_easy_getinfo_long(CURL *easy, CURLINFO info, long *value);
CURLcode peel_easy_getinfo_ptr(CURL *easy, CURLINFO info, void **value);
CURLcode peel_easy_getinfo_off(CURL *easy, CURLINFO info, curl_off_t *value);
CURLcode peel_easy_getinfo_socket(CURL *easy, CURLINFO info, curl_socket_t *value);
#endif
