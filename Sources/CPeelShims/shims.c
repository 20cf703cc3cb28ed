#include "CPeelShims.h"

CURLcode peel_easy_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode peel_easy_setopt_ptr(CURL *easy, CURLoption option, const void *value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode peel_easy_setopt_off(CURL *easy, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode peel_easy_setopt_write_cb(CURL *easy, CURLoption option,
                                   size_t (*cb)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(easy, option, cb);
}
CURLcode peel_easy_setopt_seek_cb(CURL *easy, int (*cb)(void *, curl_off_t, int)) {
    return curl_easy_setopt(easy, CURLOPT_SEEKFUNCTION, cb);
}
CURLcode peel_easy_setopt_close_cb(CURL *easy, int (*cb)(void *, curl_socket_t)) {
    return curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, cb);
}
CURLcode peel_easy_setopt_open_cb(CURL *easy,
                                  curl_socket_t (*cb)(void *, curlsocktype, struct curl_sockaddr *)) {
    return curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, cb);
}
CURLcode peel_easy_setopt_prereq_cb(CURL *easy, int (*cb)(void *, char *, char *, int, int)) {
    return curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, cb);
}
CURLMcode peel_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}
CURLMcode peel_multi_setopt_ptr(CURLM *multi, CURLMoption option, void *value) {
    return curl_multi_setopt(multi, option, value);
}
CURLMcode peel_multi_setopt_socket_cb(CURLM *multi,
                                      int (*cb)(CURL *, curl_socket_t, int, void *, void *)) {
    return curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, cb);
}
CURLMcode peel_multi_setopt_timer_cb(CURLM *multi, int (*cb)(CURLM *, long, void *)) {
    return curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, cb);
}
CURLcode peel_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}
CURLcode peel_easy_getinfo_ptr(CURL *easy, CURLINFO info, void **value) {
    return curl_easy_getinfo(easy, info, value);
}
CURLcode peel_easy_getinfo_off(CURL *easy, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(easy, info, value);
}

CURLcode peel_easy_getinfo_socket(CURL *easy, CURLINFO info, curl_socket_t *value) {
    return curl_easy_getinfo(easy, info, value);
}
