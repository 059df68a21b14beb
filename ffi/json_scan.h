/*
 * json_scan.h: just enough JSON for the bridge to route lines it does not own.
 *
 * The bridge never interprets a message: oamd validates every line it is sent, and answers a bad
 * one. What the bridge needs is where a few top-level members are (the "id", "method" and
 * "params" members, and "requestId" inside "params") so that it can track requests, match
 * responses and put an id back. The scanner finds member spans without copying and reports
 * "not an object" for anything it cannot walk; such a line is simply passed on untouched.
 */
#ifndef OAMD_FFI_JSON_SCAN_H
#define OAMD_FFI_JSON_SCAN_H

#include <stddef.h>

/* A slice of the scanned text: the raw bytes of one JSON value, exactly as they were written. */
typedef struct {
    const char *start;
    size_t length;
} json_span;

/* The members of a top-level object the bridge cares about; a member not present has start NULL. */
typedef struct {
    json_span id;
    json_span method;
    json_span params;
    json_span jsonrpc;
} json_members;

/* Scans text[0..length) as one JSON object and fills *members. Returns 0, or -1 when the text is
 * not an object the scanner can walk (a later duplicate member wins, as in most parsers). */
int json_scan_object(const char *text, size_t length, json_members *members);

/* The span of member `name` of the object spanned by `object`, or start NULL. */
json_span json_find_member(json_span object, const char *name);

/* Visits each member of `object` in order; returns -1 when it is not an object. */
typedef void (*json_member_visitor)(json_span key, json_span value, void *context);
int json_each_member(json_span object, json_member_visitor visit, void *context);

/* True when the member name `key` (a string span) reads `name` once decoded. */
int json_key_is(json_span key, const char *name);

/* True for a string or number value: the only kinds of id JSON-RPC allows besides null. */
int json_is_id(json_span value);
int json_is_string(json_span value);

/* A key that identifies an id whatever its spelling: "s:" + the decoded string, or "n:" + the
 * number in shortest round-trip form (so 1, 1.0 and 1e0 match, as oamd echoes integral numbers
 * as plain digits). Returns a malloc'd string, or NULL when out of memory. */
char *json_id_key(json_span value);

/* The decoded bytes of a string value (escapes resolved), malloc'd and NUL-terminated; NULL when
 * the span is not a well-formed string or on out of memory. *length receives the byte count. */
char *json_decode_string(json_span value, size_t *length);

/* True when text[0..length) is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF). */
int utf8_is_valid(const char *text, size_t length);

#endif
