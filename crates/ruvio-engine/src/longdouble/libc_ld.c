/*
 * Option (b) for INCRBYFLOAT: the C library's own strtold and printf, called the way
 * Redis's string2ld and ld2string(LD_STR_HUMAN) call them. Ruvio's code, written for
 * Ruvio; values cross the boundary as the 10 bytes of the x87 format (Rust has no
 * 80-bit float type), copied with memcpy so no alignment is assumed.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest float text Redis accepts (its MAX_LONG_DOUBLE_CHARS); also the size of
 * the output buffer the caller passes, enough for the widest %.17Lf of a finite
 * long double (4933 integer digits + sign + dot + 17 fraction digits). */
#define LD_CHARS_MAX (5 * 1024)
#define LD_BYTES 10

/* 1 and the value in out[0..10] when Redis would accept s: the whole text is one
 * strtold number, it does not start with a space, it is not NaN, and it does not
 * overflow to infinity or underflow to zero (subnormal results are kept). */
int ruvio_ld_parse(const unsigned char *s, size_t len, unsigned char *out) {
    char buf[LD_CHARS_MAX];
    char *end;
    long double v;

    if (len == 0 || len >= sizeof buf) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    v = strtold(buf, &end);
    if (isspace((unsigned char)buf[0]) || (size_t)(end - buf) != len) return 0;
    if (errno == ERANGE && (isinf(v) || v == 0)) return 0;
    if (isnan(v)) return 0;
    memcpy(out, &v, LD_BYTES);
    return 1;
}

/* out = a + b in long double arithmetic. */
void ruvio_ld_add(const unsigned char *a, const unsigned char *b, unsigned char *out) {
    long double x = 0, y = 0, sum;

    memcpy(&x, a, LD_BYTES);
    memcpy(&y, b, LD_BYTES);
    sum = x + y;
    memcpy(out, &sum, LD_BYTES);
}

/* %.17Lf of a finite value with the fraction's trailing zeros (and then a trailing
 * dot) cut and "-0" written "0"; returns the length written to buf (LD_CHARS_MAX
 * bytes), 0 if it did not fit. */
int ruvio_ld_format_human(const unsigned char *v, char *buf) {
    long double x = 0;
    int len;

    memcpy(&x, v, LD_BYTES);
    len = snprintf(buf, LD_CHARS_MAX, "%.17Lf", x);
    if (len < 0 || len + 1 > LD_CHARS_MAX) return 0;
    if (memchr(buf, '.', (size_t)len) != NULL) {
        while (buf[len - 1] == '0') len--;
        if (buf[len - 1] == '.') len--;
    }
    if (len == 2 && buf[0] == '-' && buf[1] == '0') {
        buf[0] = '0';
        len = 1;
    }
    return len;
}
