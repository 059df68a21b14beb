/*
 * child_win32.c: child.h on Windows (built with MinGW-w64, whose winpthreads serves the rest of
 * the library; see ffi/README.md).
 *
 * The child is started with CreateProcessW. Its two pipe ends are the only handles it inherits:
 * they are named in PROC_THREAD_ATTRIBUTE_HANDLE_LIST, so a second bridge's child (or any other
 * process the host starts meanwhile) never holds the first one's stdin. Anonymous pipes cannot be
 * polled, so child_wake cancels a read or write blocked in another thread with CancelIoEx and
 * marks the child woken, which every later call checks first; child_stop terminates the child
 * after its grace period, which ends any read still waiting.
 */
#include "child.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

/* Most arguments a child is given: the executable, "stdio", the bridge's extras. */
#define MAX_ARGUMENTS 16
/* What oamd exits with when terminated from here (it has no signals to tell it apart). */
#define TERMINATED_EXIT_CODE 143

struct oamd_child {
    PROCESS_INFORMATION process;
    HANDLE input, output;
    volatile LONG woken;
};

static void close_handle(HANDLE *handle) {
    if (*handle) CloseHandle(*handle);
    *handle = NULL;
}

/* Appends `argument` to a command line, quoted so that CommandLineToArgvW reads it back: a run of
 * backslashes is doubled before a quote (which is escaped) and before the closing quote. */
static void append_argument(wchar_t *line, size_t size, const wchar_t *argument) {
    size_t n = wcslen(line);
#define PUT(c)                          \
    do {                                \
        if (n + 2 < size) line[n++] = (c); \
    } while (0)
    if (n) PUT(L' ');
    PUT(L'"');
    for (const wchar_t *p = argument;; p++) {
        size_t slashes = 0;
        while (*p == L'\\') slashes++, p++;
        size_t doubled = *p == L'\0' ? slashes * 2 : *p == L'"' ? slashes * 2 + 1 : slashes;
        for (size_t i = 0; i < doubled; i++) PUT(L'\\');
        if (*p == L'\0') break;
        PUT(*p);
    }
    PUT(L'"');
#undef PUT
    line[n] = L'\0';
}

static wchar_t *widen(const char *text) {
    int n = MultiByteToWideChar(CP_UTF8, 0, text, -1, NULL, 0);
    wchar_t *wide = n > 0 ? malloc((size_t)n * sizeof *wide) : NULL;
    if (wide) MultiByteToWideChar(CP_UTF8, 0, text, -1, wide, n);
    return wide;
}

oamd_child *child_spawn(const char *executable, const char *const *extra_args, char *error, size_t error_size) {
    oamd_child *child = calloc(1, sizeof *child);
    HANDLE child_input = NULL, child_output = NULL;
    SECURITY_ATTRIBUTES inheritable = {sizeof inheritable, NULL, TRUE};
    wchar_t *command = NULL, *program = NULL;
    LPPROC_THREAD_ATTRIBUTE_LIST attributes = NULL;
    if (!child || !CreatePipe(&child_input, &child->input, &inheritable, 0) ||
        !CreatePipe(&child->output, &child_output, &inheritable, 0)) {
        snprintf(error, error_size, "CreatePipe failed (%lu)", GetLastError());
        goto fail;
    }
    /* The library's own ends are never inherited. */
    SetHandleInformation(child->input, HANDLE_FLAG_INHERIT, 0);
    SetHandleInformation(child->output, HANDLE_FLAG_INHERIT, 0);

    size_t command_size = 32768; /* CreateProcessW's limit, in characters */
    command = calloc(command_size, sizeof *command);
    program = widen(executable);
    if (!command || !program) {
        snprintf(error, error_size, "out of memory");
        goto fail;
    }
    append_argument(command, command_size, program);
    append_argument(command, command_size, L"stdio");
    for (size_t i = 0; extra_args && extra_args[i] && i < MAX_ARGUMENTS; i++) {
        wchar_t *argument = widen(extra_args[i]);
        if (argument) append_argument(command, command_size, argument);
        free(argument);
    }

    SIZE_T attributes_size = 0;
    InitializeProcThreadAttributeList(NULL, 1, 0, &attributes_size);
    attributes = malloc(attributes_size);
    HANDLE inherited[2] = {child_input, child_output};
    if (!attributes || !InitializeProcThreadAttributeList(attributes, 1, 0, &attributes_size) ||
        !UpdateProcThreadAttribute(attributes, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, inherited, sizeof inherited,
                                   NULL, NULL)) {
        snprintf(error, error_size, "cannot restrict inherited handles (%lu)", GetLastError());
        goto fail;
    }
    STARTUPINFOEXW startup;
    memset(&startup, 0, sizeof startup);
    startup.StartupInfo.cb = sizeof startup;
    startup.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    startup.StartupInfo.hStdInput = child_input;
    startup.StartupInfo.hStdOutput = child_output;
    startup.StartupInfo.hStdError = GetStdHandle(STD_ERROR_HANDLE);
    startup.lpAttributeList = attributes;
    /* A path runs that file; a bare name is looked up on PATH (lpApplicationName NULL). */
    int is_path = strchr(executable, '\\') || strchr(executable, '/');
    if (!CreateProcessW(is_path ? program : NULL, command, NULL, NULL, TRUE,
                        EXTENDED_STARTUPINFO_PRESENT | CREATE_NO_WINDOW, NULL, NULL, &startup.StartupInfo,
                        &child->process)) {
        snprintf(error, error_size, "cannot start %s (error %lu)", executable, GetLastError());
        goto fail;
    }
    CloseHandle(child->process.hThread);
    child->process.hThread = NULL;
    DeleteProcThreadAttributeList(attributes);
    free(attributes);
    free(command);
    free(program);
    CloseHandle(child_input);
    CloseHandle(child_output);
    return child;
fail:
    if (attributes) DeleteProcThreadAttributeList(attributes);
    free(attributes);
    free(command);
    free(program);
    close_handle(&child_input);
    close_handle(&child_output);
    if (child) {
        close_handle(&child->input);
        close_handle(&child->output);
    }
    free(child);
    return NULL;
}

long child_read(oamd_child *child, char *buffer, size_t size) {
    if (child->woken) return CHILD_WOKEN;
    DWORD n = 0;
    if (ReadFile(child->output, buffer, (DWORD)size, &n, NULL)) return n > 0 ? (long)n : CHILD_END;
    if (child->woken || GetLastError() == ERROR_OPERATION_ABORTED) return CHILD_WOKEN;
    return GetLastError() == ERROR_BROKEN_PIPE ? CHILD_END : CHILD_BROKEN;
}

int child_write_all(oamd_child *child, const char *buffer, size_t size) {
    while (size > 0) {
        if (child->woken) return CHILD_WOKEN;
        DWORD n = 0;
        if (!WriteFile(child->input, buffer, (DWORD)size, &n, NULL))
            return child->woken || GetLastError() == ERROR_OPERATION_ABORTED ? CHILD_WOKEN : CHILD_BROKEN;
        buffer += n;
        size -= n;
    }
    return 0;
}

void child_write_if_room(oamd_child *child, const char *buffer, size_t size) {
    /* An anonymous pipe cannot be written without blocking, nor its free space read from the
     * writing end: on Windows the last line is not sent. The child reads end of input instead
     * and is terminated after its grace period if a turn keeps it busy. */
    (void)child;
    (void)buffer;
    (void)size;
}

void child_close_input(oamd_child *child) { close_handle(&child->input); }

void child_close_output(oamd_child *child) { close_handle(&child->output); }

void child_wake(oamd_child *child) {
    InterlockedExchange(&child->woken, 1);
    if (child->output) CancelIoEx(child->output, NULL);
    if (child->input) CancelIoEx(child->input, NULL);
}

void child_stop(oamd_child *child, int grace_ms) {
    if (!child->process.hProcess) return;
    /* Windows has no SIGTERM to send in between: one grace period for end of input, one more
     * after the library's ends are closed, then the process is terminated. */
    if (WaitForSingleObject(child->process.hProcess, (DWORD)grace_ms * 2) != WAIT_OBJECT_0) {
        TerminateProcess(child->process.hProcess, TERMINATED_EXIT_CODE);
        WaitForSingleObject(child->process.hProcess, INFINITE);
    }
    close_handle(&child->process.hProcess);
}

/* Windows has no fork: a handle is always its creator's. */
int child_owned_here(const oamd_child *child) {
    (void)child;
    return 1;
}

void child_forget(oamd_child *child) { child_free(child); }

void child_free(oamd_child *child) {
    if (!child) return;
    close_handle(&child->input);
    close_handle(&child->output);
    close_handle(&child->process.hProcess);
    free(child);
}

char *child_default_executable(void) {
    static const wchar_t *const beside[] = {L"oamd.exe", L"oamd\\oamd.exe", L"..\\oamd\\oamd.exe"};
    HMODULE module = NULL;
    wchar_t folder[MAX_PATH];
    if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                            (LPCWSTR)(void *)&child_default_executable, &module))
        return NULL;
    DWORD n = GetModuleFileNameW(module, folder, MAX_PATH);
    if (n == 0 || n >= MAX_PATH) return NULL;
    wchar_t *slash = wcsrchr(folder, L'\\');
    if (!slash) return NULL;
    *slash = L'\0';
    for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++) {
        wchar_t path[MAX_PATH * 2];
        _snwprintf(path, MAX_PATH * 2, L"%ls\\%ls", folder, beside[i]);
        path[MAX_PATH * 2 - 1] = L'\0';
        DWORD attributes = GetFileAttributesW(path);
        if (attributes == INVALID_FILE_ATTRIBUTES || (attributes & FILE_ATTRIBUTE_DIRECTORY)) continue;
        int size = WideCharToMultiByte(CP_UTF8, 0, path, -1, NULL, 0, NULL, NULL);
        char *utf8 = size > 0 ? malloc((size_t)size) : NULL;
        if (utf8) WideCharToMultiByte(CP_UTF8, 0, path, -1, utf8, size, NULL, NULL);
        return utf8;
    }
    return NULL;
}

const char *child_executable_name(void) { return "oamd.exe"; }
