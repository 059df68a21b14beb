/*
 * child.h: the one oamd process behind a bridge handle, and the only code that knows the OS.
 *
 * child_posix.c (Linux, macOS, Android, BSDs) and child_win32.c (Windows) each implement it. A
 * child is started with its stdin and stdout on pipes that no other process inherits (the
 * bridge's second handle must not keep the first one's stdin open), reads and writes can be
 * woken from another thread, and child_stop always leaves no process behind.
 */
#ifndef OAMD_FFI_CHILD_H
#define OAMD_FFI_CHILD_H

#include <stddef.h>

typedef struct oamd_child oamd_child;

/* What child_read and child_write_all report besides a byte count. */
enum {
    CHILD_END = 0,     /* end of the child's output */
    CHILD_BROKEN = -1, /* the pipe failed (the child is gone) */
    CHILD_WOKEN = -2,  /* child_wake was called */
};

/* Starts `executable stdio [extra_args...]` (extra_args NULL-terminated, may be NULL). Returns
 * NULL and writes a reason into error[0..error_size) when it cannot. */
oamd_child *child_spawn(const char *executable, const char *const *extra_args, char *error, size_t error_size);

/* Reads what the child printed: a count > 0, CHILD_END, CHILD_BROKEN or CHILD_WOKEN. */
long child_read(oamd_child *child, char *buffer, size_t size);

/* Writes all of buffer to the child's stdin: 0, CHILD_BROKEN or CHILD_WOKEN. */
int child_write_all(oamd_child *child, const char *buffer, size_t size);

/* Writes buffer only if the pipe takes it now (a last line before closing); never blocks. */
void child_write_if_room(oamd_child *child, const char *buffer, size_t size);

/* Closes the child's stdin (it reads end of input). Called by the thread that writes. */
void child_close_input(oamd_child *child);

/* Closes the library's end of the child's stdout: a child still printing gets EPIPE and exits. */
void child_close_output(oamd_child *child);

/* Wakes a child_read or child_write_all blocked in another thread, now and from then on. */
void child_wake(oamd_child *child);

/* Waits up to grace_ms for the child to exit, then asks it to terminate, waits grace_ms more,
 * then kills it; always reaps it. Safe once both pipes' threads are done or woken. */
void child_stop(oamd_child *child, int grace_ms);

/* False in a process forked from the one that spawned the child: the copy there shares the parent's
 * pipes (a wake would stop the parent's reader) and has none of its threads. */
int child_owned_here(const oamd_child *child);

/* In such a forked process: closes this process's copies of the pipes and frees the memory, and
 * leaves the child process and the parent's pipes alone. */
void child_forget(oamd_child *child);

/* Releases what child_spawn allocated (after child_stop, with no thread using it). */
void child_free(oamd_child *child);

/* The default executable: `oamd` beside this library, in `oamd/` beside it, or in `../oamd/`
 * (dist/ffi/liboamd_ffi.so next to dist/oamd/oamd), the first that exists; else NULL, and the
 * caller falls back to the name on PATH. Returns a malloc'd path. */
char *child_default_executable(void);

/* The executable's name when looked up on PATH ("oamd", or "oamd.exe" on Windows). */
const char *child_executable_name(void);

#endif
