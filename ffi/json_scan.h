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

/* oamd's limits (oamd/limits.py), counted the way oamd counts them: a line nesting arrays and
 * objects deeper than JSON_MAX_DEPTH (the line's own object is level 1), or longer than
 * JSON_MAX_LINE_BYTES without its line break, is answered -32600 with a null id, so the bridge must
 * not take it for a request it can match. The bridge starts oamd with --max-line-bytes set to this
 * value, and tests/test_ffi_agreement.py sends lines at each edge to both. */
#define JSON_MAX_DEPTH 128
#define JSON_MAX_LINE_BYTES (16 * 1024 * 1024)
/* Largest magnitude of a numeric id oamd echoes (2^53-1); a larger or non-finite one gets a null id. */
#define JSON_MAX_SAFE_INTEGER 9007199254740991.0

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
 * not an object the scanner can walk or nests deeper than JSON_MAX_DEPTH (a later duplicate member
 * wins, as in oamd's parser). */
int json_scan_object(const char *text, size_t length, json_members *members);

/* The span of member `name` of the object spanned by `object`, or start NULL. */
json_span json_find_member(json_span object, const char *name);

/* True when arrays and objects in text[0..length) nest deeper than `limit`, counted as oamd counts
 * them before it parses a line (oamd/jsonvalue.py nests_deeper_than): brackets inside strings do
 * not count, and the text need not be valid JSON (oamd refuses a deep line -32600 before parsing). */
int json_nests_deeper_than(const char *text, size_t length, int limit);

/* Visits each member of `object` in order; returns -1 when it is not an object. */
typedef void (*json_member_visitor)(json_span key, json_span value, void *context);
int json_each_member(json_span object, json_member_visitor visit, void *context);

/* True when the member name `key` (a string span) reads `name` once decoded. */
int json_key_is(json_span key, const char *name);

/* True for a string or number value: the only kinds of id JSON-RPC allows besides null. */
int json_is_id(json_span value);

/* True for an id oamd echoes on its answer: a string, or a finite number of magnitude at most
 * 2^53-1. Any other id is answered with a null id, which no pending request can be matched to. */
int json_is_request_id(json_span value);
int json_is_string(json_span value);

/* A key that identifies an id whatever its spelling: "s:" + the decoded string, or "n:" + the
 * number in shortest round-trip form (so 1, 1.0 and 1e0 match, as oamd echoes integral numbers
 * as plain digits, and -0 matches the 0 oamd echoes). A decoded string may hold NUL bytes, so keys
 * are compared by *length and bytes. Returns a malloc'd key, or NULL when out of memory. */
char *json_id_key(json_span value, size_t *length);

/* The decoded bytes of a string value (escapes resolved), malloc'd and NUL-terminated; NULL when
 * the span is not a well-formed string or on out of memory. *length receives the byte count. */
char *json_decode_string(json_span value, size_t *length);

/* True when text[0..length) is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF). */
int utf8_is_valid(const char *text, size_t length);

#endif
