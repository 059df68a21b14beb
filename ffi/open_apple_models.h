/*
 * open_apple_models.h: the C ABI of SpaceCorps/open-apple-models, as liboamd_ffi implements it.
 *
 * The declarations are the reference's, so a program written against Apple's bindings compiles
 * and links against liboamd_ffi unchanged; the comments are ours and describe this library (the
 * full rules, and where they come from, are in ffi/README.md).
 *
 * A bridge is a pipe for JSON-RPC 2.0 lines (protocol/PROTOCOL.md). Behind each handle runs one
 * `oamd stdio` process: oam_bridge_send queues a line for it, and everything it prints (responses,
 * notifications, its tool/call requests) reaches the callback, one line at a time, without the
 * trailing newline.
 *
 * Memory: strings given to the library are only read during the call. The line given to the
 * callback lives until the callback returns. oam_call_blocking's result belongs to the caller and
 * is released with oam_string_free. oam_version's string is static.
 *
 * Threads: every function may be called from any thread. The callback runs on one thread the
 * bridge owns, never twice at once, and sees a request's notifications and tool/call requests
 * before its response. It may call oam_bridge_send and oam_bridge_destroy, but not
 * oam_call_blocking.
 *
 * Lifetime: oam_bridge_destroy cancels what runs, waits for a callback in progress (unless it is
 * called from that callback, which is then the last one) and frees the handle; no callback runs
 * after it returns. Do not destroy a handle while another thread is inside a call with it.
 */
#ifndef OPEN_APPLE_MODELS_H
#define OPEN_APPLE_MODELS_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(OAMD_FFI_BUILD)
#define OAM_EXPORT __declspec(dllexport)
#elif defined(_WIN32)
#define OAM_EXPORT __declspec(dllimport)
#elif defined(__GNUC__)
#define OAM_EXPORT __attribute__((visibility("default")))
#else
#define OAM_EXPORT
#endif

/* A bridge handle; its contents are private. */
typedef struct oam_bridge oam_bridge;

/* Gets each line the daemon sends and the user_data given to oam_bridge_create. */
typedef void (*oam_message_callback)(const char *json_line, void *user_data);

/* What oam_bridge_send returns. */
#define OAM_OK 0
#define OAM_ERROR_INVALID_ARGUMENT (-1) /* bridge or json_line is NULL */
#define OAM_ERROR_INVALID_UTF8 (-2)     /* json_line is not UTF-8 */

/* Starts a bridge (and its oamd). NULL when callback is NULL or oamd cannot be started; the
 * reason is printed on stderr. OAM_BRIDGE_LOG=debug|info|warning|error|off sets what is printed. */
OAM_EXPORT oam_bridge *oam_bridge_create(oam_message_callback callback, void *user_data);

/* Queues one JSON-RPC message and returns at once: OAM_OK for every line it takes, even once oamd
 * is gone (the request is then answered with an error through the callback). A line that is not
 * JSON is answered -32700 through the callback. */
OAM_EXPORT int oam_bridge_send(oam_bridge *bridge, const char *json_line);

/* Cancels all work, stops oamd and frees the bridge. NULL is ignored. */
OAM_EXPORT void oam_bridge_destroy(oam_bridge *bridge);

/* This library's version ("major.minor.patch"); static, callable before any bridge exists. */
OAM_EXPORT const char *oam_version(void);

/* Sends request_json ("jsonrpc" and "id" may be left out) and waits for its response, at most
 * timeout_ms (forever when timeout_ms <= 0). Returns the response line with request_json's own id,
 * to be released with oam_string_free; on timeout an error line with code -32024 and data.code
 * "timeout". NULL only when bridge or request_json is NULL. The request's notifications and
 * tool/call requests still go to the callback, with request_json's id as their requestId. */
OAM_EXPORT char *oam_call_blocking(oam_bridge *bridge, const char *request_json, int timeout_ms);

/* Releases a string from oam_call_blocking. NULL is ignored. */
OAM_EXPORT void oam_string_free(char *string);

#ifdef __cplusplus
}
#endif

#endif
