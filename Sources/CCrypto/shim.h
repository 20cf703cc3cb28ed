// OpenSSL's libcrypto (Debian libssl-dev): HMAC-SHA-256 for the shared offline store's keys.
#include <openssl/evp.h>
#include <openssl/hmac.h>
