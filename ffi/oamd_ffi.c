/*
 * oamd_ffi.c: open-apple-models' C ABI (open_apple_models.h) over an `oamd stdio` child.
 *
 * Each handle owns one child and two threads. The writer thread is the only one that writes the
 * child's stdin: oam_bridge_send queues a line and returns, so it never waits for model work. The
 * reader thread is the only one that reads its stdout and the only one that runs the callback,
 * one line at a time and in the order oamd printed them (so a request's events and tool/call
 * requests come before its response, as oamd sends them). No lock is held while the callback
 * runs, so the callback may send. The bridge keeps the id of every request it passed on; when
 * the child's output ends, each one still unanswered gets an error line, and so does every
 * request sent after that: nothing waits forever. oam_call_blocking puts a private id on the
 * wire, keeps its response from the callback and gives it back with the caller's id.
 */
#include "open_apple_models.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "child.h"
#include "json_scan.h"

#define BRIDGE_VERSION "0.1.0"
/* Ids the bridge puts on the wire for its own requests; an engine must not use this prefix. */
#define PRIVATE_ID_PREFIX "oamd-ffi-"
/* How long oamd has to exit after end of input, and again after SIGTERM, before it is killed. */
#define STOP_GRACE_MS 250
/* Bytes read from the child's stdout at a time; lines longer than that are joined. */
#define READ_CHUNK_BYTES 65536
/* Room for a private id's digits, an error message's fixed words and the like. */
#define SMALL_TEXT_BYTES 160
/* Longest method name a timeout message repeats (whole, so that no escape is cut in two). */
#define MAX_ECHOED_METHOD_BYTES 200
#define TEXT_OF(value) SPELLED(value)
#define SPELLED(value) #value
#define MS_PER_S 1000
#define NS_PER_MS 1000000L
#define NS_PER_S 1000000000L

#define CODE_PARSE_ERROR (-32700)
#define CODE_INVALID_MESSAGE (-32600)
#define CODE_SHUT_DOWN (-32023)
#define CODE_TIMEOUT (-32024)

/* A bridge runs, then either its daemon dies (requests are answered with errors from then on) or
 * it is destroyed; destroyed is final. */
typedef enum { BRIDGE_RUNNING, BRIDGE_DAEMON_GONE, BRIDGE_CLOSING } bridge_state;

/* Who waits for a response: the engine's callback, a blocking caller, or nobody any more (a timed
 * out blocking call, the bridge's own cancel request): then the response is dropped. */
typedef enum { FOR_CALLBACK, FOR_BLOCKING_CALL, FOR_NOBODY } recipient;

typedef struct {
    pthread_cond_t ready;
    char *line; /* the response, set by the reader thread */
} blocking_wait;

typedef struct pending {
    struct pending *next;
    char *key;       /* the wire id, as json_id_key spells it (NUL bytes included) */
    size_t key_length;
    char *caller_id; /* the id to answer with, as the caller wrote it ("null" when it had none) */
    recipient recipient;
    blocking_wait *wait;
} pending;

typedef struct queued_line {
    struct queued_line *next;
    size_t length;
    char text[];
} queued_line;

struct oam_bridge {
    oam_message_callback callback;
    void *user_data;
    oamd_child *child;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* the queue grew, a request is pending after the daemon died, or the state changed */
    bridge_state state;
    queued_line *queue_head, *queue_tail;
    pending *pending;
    unsigned long next_private_id;
    pthread_t reader, writer;
    /* Blocking callers inside oam_call_blocking: the last one out lets destroy free the bridge (it
     * wakes them first, and each must re-take the lock on its way out). */
    int blocking_callers;
    pthread_cond_t callers_gone;
    int destroyed_in_callback;
    int shutdown_sent; /* the engine sent "shutdown" (Apple's bindings do before destroy): oamd exits */
};

/* ---- diagnostics (OAM_BRIDGE_LOG) ---------------------------------------------------------- */

enum { LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERROR, LOG_OFF };
static const char *const log_names[] = {"debug", "info", "warning", "error", "off"};
static int log_threshold = LOG_ERROR;
static int log_level_chosen; /* OAM_BRIDGE_LOG named a level: the child logs at it too */
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void read_log_setting(void) {
    const char *setting = getenv("OAM_BRIDGE_LOG");
    if (!setting) return;
    for (int level = LOG_DEBUG; level <= LOG_OFF; level++) {
        const char *name = log_names[level];
        size_t n = strlen(name);
        size_t i = 0;
        while (i < n && setting[i] && (setting[i] | 0x20) == name[i]) i++;
        if (i == n && setting[i] == '\0') {
            log_threshold = level;
            log_level_chosen = level != LOG_OFF;
        }
    }
}

static void log_line(int level, const char *format, ...) {
    pthread_once(&log_once, read_log_setting);
    if (level < log_threshold) return;
    char text[SMALL_TEXT_BYTES * 4];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    fprintf(stderr, "[oamd-ffi] %s: %s\n", log_names[level], text);
}

/* ---- small strings --------------------------------------------------------------------------- */

static char *copy_span(json_span span) {
    char *text = malloc(span.length + 1);
    if (!text) return NULL;
    memcpy(text, span.start, span.length);
    text[span.length] = '\0';
    return text;
}

/* text with [start, start + length) replaced by `with`; malloc'd. */
static char *replace_span(const char *text, size_t text_length, json_span span, const char *with) {
    size_t before = (size_t)(span.start - text), after = text_length - before - span.length, n = strlen(with);
    char *out = malloc(before + n + after + 1);
    if (!out) return NULL;
    memcpy(out, text, before);
    memcpy(out + before, with, n);
    memcpy(out + before + n, span.start + span.length, after);
    out[before + n + after] = '\0';
    return out;
}

/* An error response line; `message` is already JSON string content (escaped). */
static char *error_line(const char *caller_id, int code, const char *name, const char *message) {
    const char *format = "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":\"%s\",\"data\":{\"code\":\"%s\"}}}";
    int n = snprintf(NULL, 0, format, caller_id, code, message, name);
    char *line = malloc((size_t)n + 1);
    if (line) snprintf(line, (size_t)n + 1, format, caller_id, code, message, name);
    return line;
}

/* oamd's -32600 for a line past one of its limits, worded as oamd words it. */
static char *error_line_with_limit(const char *caller_id, const char *message, int limit) {
    const char *shape = "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":\"%s\",\"data\":{\"code\":\"invalid_message\",\"limit\":%d}}}";
    int n = snprintf(NULL, 0, shape, caller_id, CODE_INVALID_MESSAGE, message, limit);
    char *line = malloc((size_t)n + 1);
    if (line) snprintf(line, (size_t)n + 1, shape, caller_id, CODE_INVALID_MESSAGE, message, limit);
    return line;
}

static char *daemon_gone_line(const char *caller_id) {
    return error_line(caller_id, CODE_SHUT_DOWN, "shut_down", "oamd exited before answering.");
}

/* ---- pending requests (called with the lock held) ------------------------------------------- */

/* An entry for the request whose wire id is `id`; takes caller_id. */
static pending *new_pending(json_span id, char *caller_id, recipient recipient, blocking_wait *wait) {
    pending *entry = calloc(1, sizeof *entry);
    size_t key_length = 0;
    char *key = json_id_key(id, &key_length);
    if (!entry || !key || !caller_id) {
        free(entry);
        free(key);
        free(caller_id);
        return NULL;
    }
    entry->key = key;
    entry->key_length = key_length;
    entry->caller_id = caller_id;
    entry->recipient = recipient;
    entry->wait = wait;
    return entry;
}

static void free_pending(pending *entry) {
    free(entry->key);
    free(entry->caller_id);
    free(entry);
}

/* The oldest entry with the key of wire id `id`, unlinked when `take`; NULL if none. */
static pending *find_pending(oam_bridge *bridge, const char *key, size_t key_length, int take) {
    for (pending **link = &bridge->pending; *link; link = &(*link)->next) {
        pending *entry = *link;
        if (entry->key_length != key_length || memcmp(entry->key, key, key_length) != 0) continue;
        if (take) *link = entry->next;
        return entry;
    }
    return NULL;
}

static void add_pending(oam_bridge *bridge, pending *entry) {
    /* Appended, so that duplicate ids are answered oldest first and death errors keep send order. */
    pending **link = &bridge->pending;
    while (*link) link = &(*link)->next;
    entry->next = NULL;
    *link = entry;
}

/* text as one line on the wire: a line break inside a message would split it in two, so each is
 * written as a space (white space to JSON between tokens). What the bridge scans and tracks is
 * this text, exactly what oamd reads. NUL-terminated in place of the final line break until it
 * is queued; NULL when out of memory. */
static queued_line *one_line(const char *text, size_t length) {
    queued_line *line = malloc(sizeof *line + length + 1);
    if (!line) return NULL;
    for (size_t i = 0; i < length; i++) line->text[i] = text[i] == '\n' || text[i] == '\r' ? ' ' : text[i];
    line->text[length] = '\0';
    line->length = length;
    line->next = NULL;
    return line;
}

/* Queues a line made by one_line; the queue owns it from now on. */
static void enqueue_line(oam_bridge *bridge, queued_line *line) {
    line->text[line->length++] = '\n';
    if (bridge->queue_tail) bridge->queue_tail->next = line;
    else bridge->queue_head = line;
    bridge->queue_tail = line;
    pthread_cond_broadcast(&bridge->changed);
}

/* Whether oamd answers a line json_scan_object walked with its id, so that the bridge can match
 * the answer: a request (a method and an id oamd echoes) within the length oamd reads. The walk
 * itself refuses a line deeper than oamd reads. Any other line is answered with a null id, or
 * not at all, and is passed on untracked. */
static int answered_with_its_id(size_t length, const json_members *members) {
    return length <= JSON_MAX_LINE_BYTES && members->method.start && json_is_request_id(members->id);
}

static void free_queue(oam_bridge *bridge) {
    while (bridge->queue_head) {
        queued_line *next = bridge->queue_head->next;
        free(bridge->queue_head);
        bridge->queue_head = next;
    }
    bridge->queue_tail = NULL;
}

/* Hands a blocking caller its line (or an error if there is no memory for it) and wakes it. */
static void answer_blocking(pending *entry, char *line) {
    entry->wait->line = line ? line : daemon_gone_line(entry->caller_id);
    pthread_cond_signal(&entry->wait->ready);
}

/* ---- the reader thread ---------------------------------------------------------------------- */

/* Runs the callback unless the bridge is being destroyed; returns -1 then. */
static int deliver(oam_bridge *bridge, const char *line) {
    pthread_mutex_lock(&bridge->lock);
    int closing = bridge->state == BRIDGE_CLOSING;
    pthread_mutex_unlock(&bridge->lock);
    if (closing) return -1;
    bridge->callback(line, bridge->user_data);
    return 0;
}

/* A response: to the callback, to a blocking caller with its own id back, or dropped. */
static int route_response(oam_bridge *bridge, const char *line, size_t length, json_span id) {
    size_t key_length = 0;
    char *key = json_id_key(id, &key_length);
    if (!key) return deliver(bridge, line);
    pthread_mutex_lock(&bridge->lock);
    pending *entry = find_pending(bridge, key, key_length, 1);
    free(key);
    if (!entry) {
        pthread_mutex_unlock(&bridge->lock);
        return deliver(bridge, line);
    }
    recipient recipient = entry->recipient;
    /* The caller's id goes back byte for byte (oamd may spell an escaped string id differently). */
    char *restored = recipient == FOR_NOBODY ? NULL : replace_span(line, length, id, entry->caller_id);
    if (recipient == FOR_BLOCKING_CALL) answer_blocking(entry, restored);
    pthread_mutex_unlock(&bridge->lock);
    free_pending(entry);
    if (recipient != FOR_CALLBACK) return 0;
    int status = deliver(bridge, restored ? restored : line);
    free(restored);
    return status;
}

/* A notification or tool/call of a blocking call names the call's private id in requestId: the
 * callback sees the caller's id instead. */
static int route_message(oam_bridge *bridge, const char *line, size_t length, json_span params) {
    json_span request_id = json_find_member(params, "requestId");
    const char *prefix = "\"" PRIVATE_ID_PREFIX;
    if (!json_is_string(request_id) || request_id.length < strlen(prefix) ||
        memcmp(request_id.start, prefix, strlen(prefix)) != 0)
        return deliver(bridge, line);
    size_t key_length = 0;
    char *key = json_id_key(request_id, &key_length), *restored = NULL;
    pthread_mutex_lock(&bridge->lock);
    pending *entry = key ? find_pending(bridge, key, key_length, 0) : NULL;
    if (entry && entry->recipient != FOR_CALLBACK) restored = replace_span(line, length, request_id, entry->caller_id);
    pthread_mutex_unlock(&bridge->lock);
    free(key);
    int status = deliver(bridge, restored ? restored : line);
    free(restored);
    return status;
}

static int route_line(oam_bridge *bridge, char *line, size_t length) {
    if (length > 0 && line[length - 1] == '\r') line[--length] = '\0';
    if (length == 0) return 0;
    json_members members;
    if (json_scan_object(line, length, &members) != 0) return deliver(bridge, line);
    if (!members.method.start && json_is_id(members.id)) return route_response(bridge, line, length, members.id);
    if (members.method.start && members.params.start) return route_message(bridge, line, length, members.params);
    return deliver(bridge, line);
}

/* Reads the child's output until it ends or the bridge is destroyed; 0 when it ended. */
static int read_output(oam_bridge *bridge) {
    size_t capacity = READ_CHUNK_BYTES, used = 0;
    char *buffer = malloc(capacity + 1);
    int status = -1;
    while (buffer) {
        if (capacity - used < READ_CHUNK_BYTES) {
            char *grown = realloc(buffer, capacity * 2 + 1);
            if (!grown) break;
            buffer = grown;
            capacity *= 2;
        }
        long n = child_read(bridge->child, buffer + used, READ_CHUNK_BYTES);
        if (n == CHILD_WOKEN) break;
        if (n == CHILD_END || n == CHILD_BROKEN) {
            buffer[used] = '\0';
            status = used > 0 && route_line(bridge, buffer, used) != 0 ? -1 : 0;
            break;
        }
        size_t scanned = used, start = 0;
        used += (size_t)n;
        int closing = 0;
        for (size_t i = scanned; i < used && !closing; i++) {
            if (buffer[i] != '\n') continue;
            buffer[i] = '\0';
            closing = route_line(bridge, buffer + start, i - start) != 0;
            start = i + 1;
        }
        if (closing) break;
        memmove(buffer, buffer + start, used - start);
        used -= start;
    }
    free(buffer);
    return status;
}

/* After the child's output ended: every request still waiting, and each one sent from now on,
 * gets an error line, until the bridge is destroyed. */
static void answer_after_exit(oam_bridge *bridge) {
    pthread_mutex_lock(&bridge->lock);
    if (bridge->state == BRIDGE_RUNNING) {
        bridge->state = BRIDGE_DAEMON_GONE;
        /* After the engine's own shutdown the exit is what it asked for, not a fault. */
        log_line(bridge->shutdown_sent ? LOG_INFO : LOG_ERROR,
                 "oamd exited%s; every request from now on is answered -32023",
                 bridge->shutdown_sent ? " after the engine's shutdown" : "");
        pthread_cond_broadcast(&bridge->changed);
    }
    while (bridge->state == BRIDGE_DAEMON_GONE) {
        pending *entry = bridge->pending;
        if (!entry) {
            pthread_cond_wait(&bridge->changed, &bridge->lock);
            continue;
        }
        bridge->pending = entry->next;
        char *line = entry->recipient == FOR_NOBODY ? NULL : daemon_gone_line(entry->caller_id);
        if (entry->recipient == FOR_BLOCKING_CALL) {
            answer_blocking(entry, line);
            line = NULL;
        }
        pthread_mutex_unlock(&bridge->lock);
        free_pending(entry);
        if (line) deliver(bridge, line);
        free(line);
        pthread_mutex_lock(&bridge->lock);
    }
    pthread_mutex_unlock(&bridge->lock);
}

static void finish(oam_bridge *bridge);

static void *reader_main(void *argument) {
    oam_bridge *bridge = argument;
    if (read_output(bridge) == 0) answer_after_exit(bridge);
    pthread_mutex_lock(&bridge->lock);
    int self_destroyed = bridge->destroyed_in_callback;
    pthread_mutex_unlock(&bridge->lock);
    if (self_destroyed) {
        /* oam_bridge_destroy ran inside the callback and returned at once: the teardown is ours. */
        pthread_detach(pthread_self());
        finish(bridge);
    }
    return NULL;
}

/* ---- the writer thread ---------------------------------------------------------------------- */

static void *writer_main(void *argument) {
    oam_bridge *bridge = argument;
    int broken = 0;
    pthread_mutex_lock(&bridge->lock);
    for (;;) {
        while (bridge->state == BRIDGE_RUNNING && !bridge->queue_head) pthread_cond_wait(&bridge->changed, &bridge->lock);
        if (bridge->state != BRIDGE_RUNNING) break;
        queued_line *line = bridge->queue_head;
        bridge->queue_head = line->next;
        if (!bridge->queue_head) bridge->queue_tail = NULL;
        pthread_mutex_unlock(&bridge->lock);
        /* After a failed write the child is gone: lines are dropped until the reader sees its
         * output end and answers their requests. */
        if (!broken && child_write_all(bridge->child, line->text, line->length) == CHILD_BROKEN) broken = 1;
        free(line);
        pthread_mutex_lock(&bridge->lock);
    }
    free_queue(bridge);
    int closing = bridge->state == BRIDGE_CLOSING;
    pthread_mutex_unlock(&bridge->lock);
    if (closing && !broken) {
        /* Cancels running turns at once; end of input alone would let them finish first. */
        const char shutdown[] = "{\"jsonrpc\":\"2.0\",\"method\":\"shutdown\"}\n";
        child_write_if_room(bridge->child, shutdown, sizeof shutdown - 1);
    }
    child_close_input(bridge->child);
    return NULL;
}

/* ---- the ABI -------------------------------------------------------------------------------- */

const char *oam_version(void) { return BRIDGE_VERSION; }

void oam_string_free(char *string) { free(string); }

static oamd_child *start_daemon(void) {
    const char *configured = getenv("OAMD_EXECUTABLE");
    char *beside = configured && *configured ? NULL : child_default_executable();
    const char *executable = configured && *configured ? configured : beside ? beside : child_executable_name();
    /* oamd's line limit is set, not assumed: the bridge tracks only requests within it. */
    char line_limit[SMALL_TEXT_BYTES];
    snprintf(line_limit, sizeof line_limit, "%d", JSON_MAX_LINE_BYTES);
    const char *args[] = {"--max-line-bytes", line_limit, "--log-level", log_names[log_threshold], NULL};
    if (!log_level_chosen) args[2] = NULL;
    char error[SMALL_TEXT_BYTES * 2];
    oamd_child *child = child_spawn(executable, args, error, sizeof error);
    if (child) log_line(LOG_DEBUG, "started %s stdio", executable);
    else log_line(LOG_ERROR, "%s (set OAMD_EXECUTABLE to oamd's path)", error);
    free(beside);
    return child;
}

oam_bridge *oam_bridge_create(oam_message_callback callback, void *user_data) {
    if (!callback) return NULL;
    pthread_once(&log_once, read_log_setting);
    oam_bridge *bridge = calloc(1, sizeof *bridge);
    if (!bridge) return NULL;
    bridge->callback = callback;
    bridge->user_data = user_data;
    bridge->child = start_daemon();
    if (!bridge->child) {
        free(bridge);
        return NULL;
    }
    pthread_mutex_init(&bridge->lock, NULL);
    pthread_cond_init(&bridge->changed, NULL);
    pthread_cond_init(&bridge->callers_gone, NULL);
    bridge->state = BRIDGE_RUNNING;
    if (pthread_create(&bridge->writer, NULL, writer_main, bridge) != 0) goto no_threads;
    if (pthread_create(&bridge->reader, NULL, reader_main, bridge) != 0) {
        pthread_mutex_lock(&bridge->lock);
        bridge->state = BRIDGE_CLOSING;
        pthread_cond_broadcast(&bridge->changed);
        pthread_mutex_unlock(&bridge->lock);
        pthread_join(bridge->writer, NULL);
        goto no_threads;
    }
    return bridge;
no_threads:
    log_line(LOG_ERROR, "cannot start the bridge's threads");
    child_close_input(bridge->child);
    child_close_output(bridge->child);
    child_stop(bridge->child, 0);
    child_free(bridge->child);
    pthread_cond_destroy(&bridge->callers_gone);
    pthread_cond_destroy(&bridge->changed);
    pthread_mutex_destroy(&bridge->lock);
    free(bridge);
    return NULL;
}

int oam_bridge_send(oam_bridge *bridge, const char *json_line) {
    if (!bridge || !json_line) return OAM_ERROR_INVALID_ARGUMENT;
    /* A forked child's copy of a handle has no threads behind it: nothing it sends would leave. */
    if (!child_owned_here(bridge->child)) return OAM_ERROR_INVALID_ARGUMENT;
    size_t length = strlen(json_line);
    if (!utf8_is_valid(json_line, length)) return OAM_ERROR_INVALID_UTF8;
    queued_line *line = one_line(json_line, length);
    if (!line) return OAM_OK; /* out of memory: dropped, as a write to a dead child would be */
    json_members members;
    pending *entry = NULL;
    int scanned = json_scan_object(line->text, length, &members) == 0;
    if (scanned && answered_with_its_id(length, &members))
        entry = new_pending(members.id, copy_span(members.id), FOR_CALLBACK, NULL);
    int is_shutdown = scanned && json_is_string(members.method) && json_key_is(members.method, "shutdown");
    pthread_mutex_lock(&bridge->lock);
    if (is_shutdown) bridge->shutdown_sent = 1;
    if (bridge->state == BRIDGE_RUNNING) {
        enqueue_line(bridge, line);
        line = NULL;
    }
    if (entry && bridge->state != BRIDGE_CLOSING) {
        add_pending(bridge, entry);
        entry = NULL;
        pthread_cond_broadcast(&bridge->changed);
    }
    pthread_mutex_unlock(&bridge->lock);
    if (entry) free_pending(entry);
    free(line);
    return OAM_OK;
}

static void free_pending_list(oam_bridge *bridge) {
    while (bridge->pending) {
        pending *next = bridge->pending->next;
        free_pending(bridge->pending);
        bridge->pending = next;
    }
}

static void finish(oam_bridge *bridge) {
    /* The blocking callers destroy woke still hold a reference: they leave before the lock goes. */
    pthread_mutex_lock(&bridge->lock);
    while (bridge->blocking_callers > 0) pthread_cond_wait(&bridge->callers_gone, &bridge->lock);
    pthread_mutex_unlock(&bridge->lock);
    pthread_join(bridge->writer, NULL);
    child_close_output(bridge->child);
    child_stop(bridge->child, STOP_GRACE_MS);
    child_free(bridge->child);
    free_pending_list(bridge);
    free_queue(bridge);
    pthread_cond_destroy(&bridge->callers_gone);
    pthread_cond_destroy(&bridge->changed);
    pthread_mutex_destroy(&bridge->lock);
    free(bridge);
}

void oam_bridge_destroy(oam_bridge *bridge) {
    if (!bridge) return;
    if (!child_owned_here(bridge->child)) {
        /* A forked child's copy: its threads and daemon are the parent's. Only this process's
         * descriptors and memory go; the locks are left as fork left them (maybe held). */
        child_forget(bridge->child);
        free_pending_list(bridge);
        free_queue(bridge);
        free(bridge);
        return;
    }
    int in_callback = pthread_equal(pthread_self(), bridge->reader);
    pthread_mutex_lock(&bridge->lock);
    bridge->state = BRIDGE_CLOSING;
    bridge->destroyed_in_callback = in_callback;
    /* Calling destroy during a blocking call is undefined; still, nobody is left waiting. */
    for (pending *entry = bridge->pending; entry; entry = entry->next)
        if (entry->recipient == FOR_BLOCKING_CALL && !entry->wait->line) {
            answer_blocking(entry, error_line(entry->caller_id, CODE_SHUT_DOWN, "shut_down", "The bridge was destroyed."));
            entry->recipient = FOR_NOBODY;
        }
    pthread_cond_broadcast(&bridge->changed);
    pthread_mutex_unlock(&bridge->lock);
    child_wake(bridge->child);
    if (in_callback) return;
    pthread_join(bridge->reader, NULL);
    finish(bridge);
}

/* ---- oam_call_blocking ---------------------------------------------------------------------- */

typedef struct {
    char *text;
    size_t length, capacity;
    int failed;
} text_buffer;

static void append(text_buffer *buffer, const char *text, size_t length) {
    if (buffer->failed) return;
    if (buffer->length + length + 1 > buffer->capacity) {
        size_t capacity = (buffer->length + length + 1) * 2;
        char *grown = realloc(buffer->text, capacity);
        if (!grown) {
            buffer->failed = 1;
            return;
        }
        buffer->text = grown;
        buffer->capacity = capacity;
    }
    memcpy(buffer->text + buffer->length, text, length);
    buffer->length += length;
    buffer->text[buffer->length] = '\0';
}

static void append_text(text_buffer *buffer, const char *text) { append(buffer, text, strlen(text)); }

/* Copies every member but "jsonrpc" and "id", which the bridge writes itself. */
static void copy_member(json_span key, json_span value, void *context) {
    if (json_key_is(key, "jsonrpc") || json_key_is(key, "id")) return;
    text_buffer *buffer = context;
    append_text(buffer, ",");
    append(buffer, key.start, key.length);
    append_text(buffer, ":");
    append(buffer, value.start, value.length);
}

/* Called with the lock held. Puts a request with a fresh private id into the queue, its response
 * expected by `recipient`; returns its pending entry, or NULL without memory or (*too_long set,
 * when given) when the line would pass oamd's line limit, which oamd answers with a null id. */
static pending *send_private(oam_bridge *bridge, json_span request, recipient recipient, char *caller_id,
                             blocking_wait *wait, size_t *too_long) {
    char id[SMALL_TEXT_BYTES];
    snprintf(id, sizeof id, "\"" PRIVATE_ID_PREFIX "%lu\"", ++bridge->next_private_id);
    text_buffer line = {0};
    append_text(&line, "{\"jsonrpc\":\"2.0\",\"id\":");
    append_text(&line, id);
    json_each_member(request, copy_member, &line);
    append_text(&line, "}");
    pending *entry = NULL;
    queued_line *queued = NULL;
    if (!line.failed && line.length > JSON_MAX_LINE_BYTES) {
        if (too_long) *too_long = line.length;
        free(caller_id);
    } else if (line.failed || !(queued = one_line(line.text, line.length))) {
        free(caller_id);
    } else if ((entry = new_pending((json_span){id, strlen(id)}, caller_id, recipient, wait))) {
        add_pending(bridge, entry);
        enqueue_line(bridge, queued);
        queued = NULL;
    }
    free(queued);
    free(line.text);
    return entry;
}

/* The protocol cancels per session or NPC, not per request: a turn that timed out is cancelled
 * with session/cancel (npc/cancel for npc/talk and npc/bark), which cancels what else is queued on
 * that session too. Other methods have nothing to cancel; their late response is dropped. */
static void cancel_after_timeout(oam_bridge *bridge, const char *method, json_span params) {
    const char *cancel = NULL, *target = NULL;
    if (strcmp(method, "session/respond") == 0) cancel = "session/cancel", target = "session";
    else if (strcmp(method, "npc/talk") == 0 || strcmp(method, "npc/bark") == 0) cancel = "npc/cancel", target = "npc";
    if (!cancel || !params.start) return;
    json_span which = json_find_member(params, target);
    if (!json_is_string(which)) return;
    text_buffer request = {0};
    append_text(&request, "{\"method\":\"");
    append_text(&request, cancel);
    append_text(&request, "\",\"params\":{\"");
    append_text(&request, target);
    append_text(&request, "\":");
    append(&request, which.start, which.length);
    append_text(&request, "}}");
    if (!request.failed)
        send_private(bridge, (json_span){request.text, request.length}, FOR_NOBODY, strdup("null"), NULL, NULL);
    free(request.text);
}

static void init_wait(blocking_wait *wait) {
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
#if !defined(__APPLE__)
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
#endif
    pthread_cond_init(&wait->ready, &attributes);
    pthread_condattr_destroy(&attributes);
    wait->line = NULL;
}

static struct timespec deadline_after(int timeout_ms) {
    struct timespec deadline;
#if defined(__APPLE__)
    clock_gettime(CLOCK_REALTIME, &deadline);
#else
    clock_gettime(CLOCK_MONOTONIC, &deadline);
#endif
    deadline.tv_sec += timeout_ms / MS_PER_S;
    deadline.tv_nsec += (long)(timeout_ms % MS_PER_S) * NS_PER_MS;
    if (deadline.tv_nsec >= NS_PER_S) {
        deadline.tv_sec++;
        deadline.tv_nsec -= NS_PER_S;
    }
    return deadline;
}

/* Waits for the reader to answer; on timeout the entry is left for its response to be dropped.
 * Called with the lock held; returns the line, or NULL on timeout. */
static char *await_response(oam_bridge *bridge, pending *entry, blocking_wait *wait, int timeout_ms) {
    struct timespec deadline = deadline_after(timeout_ms > 0 ? timeout_ms : 0);
    while (!wait->line) {
        if (timeout_ms <= 0) pthread_cond_wait(&wait->ready, &bridge->lock);
        else if (pthread_cond_timedwait(&wait->ready, &bridge->lock, &deadline) == ETIMEDOUT && !wait->line) {
            entry->recipient = FOR_NOBODY;
            entry->wait = NULL;
            return NULL;
        }
    }
    return wait->line;
}

/* Checks a request as Apple's bridge does: an object, an id that is a string, a number or null (or
 * none), a non-empty string method; and as oamd would, a line nesting no deeper than it reads (a
 * deeper one is refused by oamd with a null id no blocking call could be matched to). Returns an
 * error line, or NULL when it is fine. */
static char *reject_request(const char *request, size_t length, json_members *members, char **caller_id,
                            char **method) {
    if (!utf8_is_valid(request, length))
        return error_line("null", CODE_PARSE_ERROR, "parse_error", "request_json is not valid UTF-8.");
    if (json_nests_deeper_than(request, length, JSON_MAX_DEPTH))
        return error_line_with_limit("null", "Invalid request: the JSON nests deeper than " TEXT_OF(JSON_MAX_DEPTH) " levels.", JSON_MAX_DEPTH);
    if (json_scan_object(request, length, members) != 0)
        return error_line("null", CODE_PARSE_ERROR, "parse_error", "request_json is not a JSON object.");
    json_span id = members->id;
    int no_id = !id.start || (id.length == strlen("null") && memcmp(id.start, "null", id.length) == 0);
    if (!no_id && !json_is_id(id))
        return error_line("null", CODE_INVALID_MESSAGE, "invalid_message", "'id' must be a string or a number.");
    if (!no_id && !json_is_request_id(id))
        return error_line("null", CODE_INVALID_MESSAGE, "invalid_message",
                          "A numeric 'id' must be an integer of magnitude at most 2^53-1 (9007199254740991) so it "
                          "can be echoed exactly; use a string id.");
    *caller_id = no_id ? strdup("null") : copy_span(id);
    size_t method_length = 0;
    *method = json_is_string(members->method) ? json_decode_string(members->method, &method_length) : NULL;
    if (!*method || method_length == 0 || strlen(*method) != method_length)
        return error_line(*caller_id ? *caller_id : "null", CODE_INVALID_MESSAGE, "invalid_message",
                          "'method' must be a non-empty string.");
    return NULL;
}

/* Sends the checked request and waits for its answer; called with the lock held. */
static char *call_locked(oam_bridge *bridge, const char *request, size_t length, json_members *members,
                         const char *caller_id, const char *method, int timeout_ms) {
    if (bridge->state != BRIDGE_RUNNING)
        return bridge->state == BRIDGE_DAEMON_GONE
                   ? daemon_gone_line(caller_id)
                   : error_line(caller_id, CODE_SHUT_DOWN, "shut_down", "The bridge was destroyed.");
    blocking_wait wait;
    init_wait(&wait);
    size_t too_long = 0;
    char *answer = NULL;
    pending *entry = send_private(bridge, (json_span){request, length}, FOR_BLOCKING_CALL, strdup(caller_id), &wait,
                                  &too_long);
    if (too_long) {
        /* oamd's own answer to a line past its limit (it would come with a null id). */
        char message[SMALL_TEXT_BYTES];
        snprintf(message, sizeof message, "Invalid request: the line has %zu bytes; the limit is %d.", too_long,
                 JSON_MAX_LINE_BYTES);
        answer = error_line_with_limit("null", message, JSON_MAX_LINE_BYTES);
    } else if (!entry) {
        answer = error_line(caller_id, CODE_SHUT_DOWN, "shut_down", "Out of memory.");
    } else if (!(answer = await_response(bridge, entry, &wait, timeout_ms))) {
        cancel_after_timeout(bridge, method, members->params);
        char message[SMALL_TEXT_BYTES * 2];
        /* The method is echoed as written in the request (its JSON escapes stay escaped). */
        if (members->method.length - 2 <= MAX_ECHOED_METHOD_BYTES)
            snprintf(message, sizeof message, "'%.*s' did not finish within %d ms; it was cancelled.",
                     (int)(members->method.length - 2), members->method.start + 1, timeout_ms);
        else
            snprintf(message, sizeof message, "The request did not finish within %d ms; it was cancelled.", timeout_ms);
        answer = error_line(caller_id, CODE_TIMEOUT, "timeout", message);
    }
    pthread_cond_destroy(&wait.ready);
    return answer;
}

char *oam_call_blocking(oam_bridge *bridge, const char *request_json, int timeout_ms) {
    if (!bridge || !request_json) return NULL;
    if (!child_owned_here(bridge->child))
        return error_line("null", CODE_SHUT_DOWN, "shut_down", "This handle belongs to the process that created it.");
    if (pthread_equal(pthread_self(), bridge->reader))
        return error_line("null", CODE_INVALID_MESSAGE, "invalid_message",
                          "oam_call_blocking cannot be called from inside the callback.");
    size_t length = strlen(request_json);
    queued_line *request = one_line(request_json, length);
    if (!request) return NULL;
    json_members members;
    char *caller_id = NULL, *method = NULL;
    char *answer = reject_request(request->text, length, &members, &caller_id, &method);
    if (!answer && caller_id) {
        pthread_mutex_lock(&bridge->lock);
        bridge->blocking_callers++;
        answer = call_locked(bridge, request->text, length, &members, caller_id, method, timeout_ms);
        if (--bridge->blocking_callers == 0) pthread_cond_broadcast(&bridge->callers_gone);
        pthread_mutex_unlock(&bridge->lock);
    }
    free(caller_id);
    free(method);
    free(request);
    return answer;
}
