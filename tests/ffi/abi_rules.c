/*
 * abi_rules.c: a C program written against ffi/open_apple_models.h alone, run by
 * tests/test_ffi_programs.py. It prints "ok <rule>" for each rule it checks and exits 0, or names
 * the first rule that failed and exits 1. OAMD_EXECUTABLE names the daemon.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "open_apple_models.h"

#define THREADS 8
#define WAIT_MS 10000

static int failures;

#define CHECK(rule, condition)                                 \
    do {                                                       \
        if (condition) {                                       \
            printf("ok %s\n", rule);                           \
        } else {                                               \
            printf("FAILED %s (line %d)\n", rule, __LINE__);   \
            failures++;                                        \
        }                                                      \
    } while (0)

/* What the callback saw, guarded by a lock and signalled on each line. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int lines;
    int answered_tool_call;
    int destroy_in_callback;
    char last[4096];
    oam_bridge *bridge;
} inbox;

static void on_message(const char *json_line, void *user_data) {
    inbox *box = user_data;
    pthread_mutex_lock(&box->lock);
    box->lines++;
    snprintf(box->last, sizeof box->last, "%s", json_line);
    int destroy = box->destroy_in_callback;
    box->destroy_in_callback = 0;
    pthread_cond_broadcast(&box->changed);
    pthread_mutex_unlock(&box->lock);
    if (strstr(json_line, "\"method\":\"tool/call\"")) {
        /* Answering a tool call from inside the callback must not deadlock. */
        const char *id = strstr(json_line, "\"id\":\"");
        char reply[256];
        if (id) {
            const char *end = strchr(id + 6, '"');
            snprintf(reply, sizeof reply, "{\"jsonrpc\":\"2.0\",\"id\":\"%.*s\",\"result\":{\"output\":\"done\"}}",
                     (int)(end - id - 6), id + 6);
            box->answered_tool_call = oam_bridge_send(box->bridge, reply) == OAM_OK;
        }
    }
    if (destroy) oam_bridge_destroy(box->bridge);
}

static int wait_lines(inbox *box, int count) {
    pthread_mutex_lock(&box->lock);
    int waited = 0;
    while (box->lines < count && waited < WAIT_MS / 10) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_nsec += 10 * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) deadline.tv_sec++, deadline.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&box->changed, &box->lock, &deadline);
        waited++;
    }
    int reached = box->lines >= count;
    pthread_mutex_unlock(&box->lock);
    return reached;
}

static void init_inbox(inbox *box) {
    memset(box, 0, sizeof *box);
    pthread_mutex_init(&box->lock, NULL);
    pthread_cond_init(&box->changed, NULL);
}

typedef struct {
    oam_bridge *bridge;
    int index;
    int ok;
} blocking_job;

static void *call_with_id_zero(void *argument) {
    blocking_job *job = argument;
    char request[256], expected[64];
    snprintf(request, sizeof request,
             "{\"id\":0,\"method\":\"session/create\",\"params\":{\"session\":\"c%d\"}}", job->index);
    snprintf(expected, sizeof expected, "\"session\":\"c%d\"", job->index);
    char *response = oam_call_blocking(job->bridge, request, WAIT_MS);
    job->ok = response && strstr(response, "\"id\":0,") && strstr(response, expected);
    oam_string_free(response);
    return NULL;
}

int main(void) {
    const char *version = oam_version();
    CHECK("version is static and set before any bridge", version && version == oam_version() && strchr(version, '.'));
    CHECK("create refuses a NULL callback", oam_bridge_create(NULL, NULL) == NULL);

    inbox box;
    init_inbox(&box);
    oam_bridge *bridge = oam_bridge_create(on_message, &box);
    box.bridge = bridge;
    CHECK("create starts a bridge", bridge != NULL);
    if (!bridge) return 1;
    CHECK("send refuses NULL", oam_bridge_send(NULL, "{}") == OAM_ERROR_INVALID_ARGUMENT &&
                                   oam_bridge_send(bridge, NULL) == OAM_ERROR_INVALID_ARGUMENT);
    CHECK("send refuses invalid UTF-8", oam_bridge_send(bridge, "{\"x\":\"\xc3\x28\"}") == OAM_ERROR_INVALID_UTF8);
    CHECK("call_blocking returns NULL only for NULL", oam_call_blocking(NULL, "{}", 0) == NULL &&
                                                          oam_call_blocking(bridge, NULL, 0) == NULL);
    oam_string_free(NULL);
    oam_bridge_destroy(NULL);

    CHECK("send accepts a request", oam_bridge_send(bridge, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}") == OAM_OK);
    CHECK("its response reaches the callback", wait_lines(&box, 1) && strcmp(box.last, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"result\":{}}") == 0);

    char *pong = oam_call_blocking(bridge, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"ping\"}", WAIT_MS);
    CHECK("call_blocking returns the response", pong && strcmp(pong, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}") == 0);
    oam_string_free(pong);

    pthread_t threads[THREADS];
    blocking_job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (blocking_job){bridge, i, 0};
        pthread_create(&threads[i], NULL, call_with_id_zero, &jobs[i]);
    }
    int all = 1;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        all = all && jobs[i].ok;
    }
    CHECK("eight threads calling with id 0 each get their own response", all);

    char *created = oam_call_blocking(
        bridge,
        "{\"method\":\"session/create\",\"params\":{\"session\":\"tools\",\"tools\":[{\"name\":\"act\","
        "\"description\":\"Act.\",\"execution\":\"client\"}],\"model\":{\"type\":\"scripted\",\"steps\":["
        "{\"toolCalls\":[{\"name\":\"act\",\"arguments\":{}}]},{\"template\":\"{toolOutput}\"}]}}}",
        WAIT_MS);
    oam_string_free(created);
    int before = box.lines;
    oam_bridge_send(bridge, "{\"jsonrpc\":\"2.0\",\"id\":\"turn\",\"method\":\"session/respond\",\"params\":{\"session\":\"tools\",\"prompt\":\"go\"}}");
    /* tool/call, then the response */
    CHECK("the callback answers a tool/call with send", wait_lines(&box, before + 2) && box.answered_tool_call &&
                                                            strstr(box.last, "\"text\":\"done\""));

    pthread_mutex_lock(&box.lock);
    box.destroy_in_callback = 1;
    int seen = box.lines;
    pthread_mutex_unlock(&box.lock);
    for (int i = 0; i < 10; i++) oam_bridge_send(bridge, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
    wait_lines(&box, seen + 1);
    pthread_mutex_lock(&box.lock);
    int last_one = box.lines == seen + 1;
    pthread_mutex_unlock(&box.lock);
    CHECK("destroy inside the callback makes that callback the last", last_one);

    inbox second;
    init_inbox(&second);
    oam_bridge *other = oam_bridge_create(on_message, &second);
    second.bridge = other;
    oam_bridge_send(other, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
    wait_lines(&second, 1);
    oam_bridge_destroy(other);
    pthread_mutex_lock(&second.lock);
    int after = second.lines;
    pthread_mutex_unlock(&second.lock);
    CHECK("no callback after destroy returns", after == 1);

    return failures ? 1 : 0;
}
