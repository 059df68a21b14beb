/*
 * json_scan.c: the JSON the bridge reads (see json_scan.h). It walks values without building
 * them, checks their grammar so that a line oamd will reject is never taken for a request, and
 * decodes the few strings it compares (member names, ids).
 */
#include "json_scan.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Enough for the shortest round-trip spelling of any double ("%.17g" plus sign and exponent). */
#define NUMBER_KEY_CHARS 40

static const char *skip_space(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* p at the opening quote; returns the position after the closing quote, or NULL. */
static const char *skip_string(const char *p, const char *end) {
    p++;
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        if (c == '"') return p + 1;
        if (c < 0x20) return NULL;
        if (c == '\\') {
            if (++p >= end) return NULL;
            if (*p == 'u') {
                if (end - p < 5) return NULL;
                for (int i = 1; i <= 4; i++)
                    if (hex_value(p[i]) < 0) return NULL;
                p += 5;
                continue;
            }
            if (!strchr("\"\\/bfnrt", *p) || *p == '\0') return NULL;
        }
        p++;
    }
    return NULL;
}

static const char *skip_number(const char *p, const char *end) {
    if (p < end && *p == '-') p++;
    if (p >= end || !is_digit(*p)) return NULL;
    if (*p == '0') p++;
    else
        while (p < end && is_digit(*p)) p++;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p)) return NULL;
        while (p < end && is_digit(*p)) p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || !is_digit(*p)) return NULL;
        while (p < end && is_digit(*p)) p++;
    }
    return p;
}

static const char *skip_literal(const char *p, const char *end, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(end - p) < n || memcmp(p, word, n) != 0) return NULL;
    return p + n;
}

/* One scalar at p (string, number, literal); NULL when it is none. */
static const char *skip_scalar(const char *p, const char *end) {
    switch (*p) {
    case '"': return skip_string(p, end);
    case 't': return skip_literal(p, end, "true");
    case 'f': return skip_literal(p, end, "false");
    case 'n': return skip_literal(p, end, "null");
    default: return skip_number(p, end);
    }
}

/* One whole value at p (after white space) nesting at most `max_depth` levels; returns the
 * position after it, or NULL. Containers are walked with an explicit stack, so a hostile line
 * cannot exhaust the C stack. */
static const char *skip_value(const char *p, const char *end, int max_depth) {
    char stack[JSON_MAX_DEPTH];
    int depth = 0;
    for (;;) {
        p = skip_space(p, end);
        if (p >= end) return NULL;
        if (*p == '{' || *p == '[') {
            if (depth == max_depth) return NULL;
            stack[depth++] = *p == '{' ? '}' : ']';
            p = skip_space(p + 1, end);
            if (p < end && *p == stack[depth - 1]) {
                p++;
                depth--;
                goto after_value;
            }
            if (stack[depth - 1] == '}') goto object_key;
            continue;
        }
        p = skip_scalar(p, end);
        if (!p) return NULL;
    after_value:
        if (depth == 0) return p;
        p = skip_space(p, end);
        if (p >= end) return NULL;
        if (*p == stack[depth - 1]) {
            p++;
            depth--;
            goto after_value;
        }
        if (*p != ',') return NULL;
        p = skip_space(p + 1, end);
        if (stack[depth - 1] == ']') continue;
    object_key:
        if (p >= end || *p != '"') return NULL;
        p = skip_string(p, end);
        if (!p) return NULL;
        p = skip_space(p, end);
        if (p >= end || *p != ':') return NULL;
        p++;
    }
}

/* The end of a string opened at p (after its closing quote), escapes taken as pairs, or NULL when
 * it is never closed; nothing else is checked (oamd's nesting count reads strings this way). */
static const char *string_end(const char *p, const char *end) {
    for (p++; p < end; p++) {
        if (*p == '"') return p + 1;
        if (*p == '\\' && ++p == end) return NULL;
    }
    return NULL;
}

int json_nests_deeper_than(const char *text, size_t length, int limit) {
    const char *p = text, *end = text + length;
    int depth = 0, strings = 1;
    while (p < end) {
        char c = *p;
        if (c == '"' && strings) {
            const char *after = string_end(p, end);
            /* An unclosed quote is a plain byte, and no later quote can close a string either. */
            if (after) {
                p = after;
                continue;
            }
            strings = 0;
        } else if (c == '[' || c == '{') {
            if (++depth > limit) return 1;
        } else if (c == ']' || c == '}') {
            depth--;
        }
        p++;
    }
    return 0;
}

int json_is_string(json_span value) { return value.start && value.length >= 2 && value.start[0] == '"'; }

int json_is_id(json_span value) {
    if (!value.start || value.length == 0) return 0;
    return json_is_string(value) || value.start[0] == '-' || is_digit(value.start[0]);
}

/* The double a number span reads as (strtod needs a terminated copy); NAN when it is too long to
 * be an id oamd keeps (its digits would not survive a double anyway past 2^53). */
static double number_value(json_span value) {
    char number[NUMBER_KEY_CHARS * 2];
    if (value.length >= sizeof number) return NAN;
    memcpy(number, value.start, value.length);
    number[value.length] = '\0';
    double parsed = strtod(number, NULL);
    return parsed == 0 ? 0.0 : parsed; /* -0 reads as 0, as oamd echoes it */
}

int json_is_request_id(json_span value) {
    if (!json_is_id(value)) return 0;
    if (json_is_string(value)) return 1;
    double number = number_value(value);
    return isfinite(number) && fabs(number) <= JSON_MAX_SAFE_INTEGER;
}

static void put_utf8(char *out, size_t *n, uint32_t cp) {
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xC0 | (cp >> 6));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xE0 | (cp >> 12));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | (cp >> 18));
        out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static uint32_t read_hex4(const char *p) {
    return (uint32_t)(hex_value(p[0]) << 12 | hex_value(p[1]) << 8 | hex_value(p[2]) << 4 | hex_value(p[3]));
}

char *json_decode_string(json_span value, size_t *length) {
    if (!json_is_string(value) || skip_string(value.start, value.start + value.length) != value.start + value.length)
        return NULL;
    /* Decoding never grows the text: every escape is at least as long as what it stands for. */
    char *out = malloc(value.length);
    if (!out) return NULL;
    size_t n = 0;
    const char *p = value.start + 1, *end = value.start + value.length - 1;
    while (p < end) {
        if (*p != '\\') {
            out[n++] = *p++;
            continue;
        }
        p++;
        char c = *p++;
        switch (c) {
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            uint32_t cp = read_hex4(p);
            p += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                uint32_t low = read_hex4(p + 2);
                if (low >= 0xDC00 && low < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    p += 6;
                }
            }
            /* A lone surrogate keeps its own three bytes: ids are compared, never printed. */
            put_utf8(out, &n, cp);
            break;
        }
        default: out[n++] = c; break;
        }
    }
    out[n] = '\0';
    *length = n;
    return out;
}

char *json_id_key(json_span value, size_t *length) {
    if (json_is_string(value)) {
        size_t n;
        char *text = json_decode_string(value, &n);
        if (!text) return NULL;
        char *key = malloc(n + 3);
        if (key) {
            memcpy(key, "s:", 2);
            memcpy(key + 2, text, n + 1);
            *length = n + 2;
        }
        free(text);
        return key;
    }
    double number = number_value(value);
    if (isnan(number)) return NULL;
    char *key = malloc(NUMBER_KEY_CHARS);
    if (key) *length = (size_t)snprintf(key, NUMBER_KEY_CHARS, "n:%.17g", number);
    return key;
}

/* The members of the object at `object`, each value nesting at most `max_depth` levels. */
static int each_member(json_span object, json_member_visitor visit, void *context, int max_depth) {
    const char *p = object.start, *end = object.start + object.length;
    if (!p) return -1;
    p = skip_space(p, end);
    if (p >= end || *p != '{') return -1;
    p = skip_space(p + 1, end);
    if (p < end && *p == '}') return skip_space(p + 1, end) == end ? 0 : -1;
    for (;;) {
        if (p >= end || *p != '"') return -1;
        const char *key_end = skip_string(p, end);
        if (!key_end) return -1;
        json_span key = {p, (size_t)(key_end - p)};
        p = skip_space(key_end, end);
        if (p >= end || *p != ':') return -1;
        p = skip_space(p + 1, end);
        const char *value_end = skip_value(p, end, max_depth);
        if (!value_end) return -1;
        if (visit) visit(key, (json_span){p, (size_t)(value_end - p)}, context);
        p = skip_space(value_end, end);
        if (p < end && *p == '}') return skip_space(p + 1, end) == end ? 0 : -1;
        if (p >= end || *p != ',') return -1;
        p = skip_space(p + 1, end);
    }
}

/* Within a line already scanned whole, a nested object's values are as deep as they were found. */
int json_each_member(json_span object, json_member_visitor visit, void *context) {
    return each_member(object, visit, context, JSON_MAX_DEPTH - 1);
}

typedef struct {
    const char *name;
    json_span found;
} member_search;

int json_key_is(json_span key, const char *name) {
    size_t n;
    char *decoded = json_decode_string(key, &n);
    int equal = decoded && n == strlen(name) && memcmp(decoded, name, n) == 0;
    free(decoded);
    return equal;
}

static void match_member(json_span key, json_span value, void *context) {
    member_search *search = context;
    if (json_key_is(key, search->name)) search->found = value;
}

json_span json_find_member(json_span object, const char *name) {
    member_search search = {name, {NULL, 0}};
    if (json_each_member(object, match_member, &search) != 0) return (json_span){NULL, 0};
    return search.found;
}

static void collect_members(json_span key, json_span value, void *context) {
    json_members *members = context;
    if (json_key_is(key, "id")) members->id = value;
    else if (json_key_is(key, "method")) members->method = value;
    else if (json_key_is(key, "params")) members->params = value;
    else if (json_key_is(key, "jsonrpc")) members->jsonrpc = value;
}

int json_scan_object(const char *text, size_t length, json_members *members) {
    memset(members, 0, sizeof *members);
    /* The line's own object is level 1, as oamd counts: its members' values get one level less. */
    int status = each_member((json_span){text, length}, collect_members, members, JSON_MAX_DEPTH - 1);
    if (status != 0) memset(members, 0, sizeof *members);
    return status;
}

int utf8_is_valid(const char *text, size_t length) {
    const unsigned char *p = (const unsigned char *)text, *end = p + length;
    while (p < end) {
        unsigned char c = *p;
        if (c < 0x80) {
            p++;
            continue;
        }
        size_t extra;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) extra = 1, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) extra = 2, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) extra = 3, cp = c & 0x07, min = 0x10000;
        else return 0;
        if ((size_t)(end - p) <= extra) return 0;
        for (size_t i = 1; i <= extra; i++) {
            if ((p[i] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (p[i] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return 0;
        p += extra + 1;
    }
    return 1;
}
