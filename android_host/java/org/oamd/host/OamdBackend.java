package org.oamd.host;

/**
 * The contract oamd's Python side drives through pyjnius. Plain Java only (no android.* types),
 * so the same interface compiles on a desktop JDK and is faked in tests.
 *
 * <p>Every method may be called from one Python-owned thread; {@link #generate} returns at once
 * and streams into its sink from the backend's own threads.
 */
public interface OamdBackend {
    /**
     * A JSON object: {"status": "available|downloadable|downloading|unavailable",
     * "reason": ..., "detail": ..., "contextSize": n, "maxOutputTokens": n,
     * "bytesDownloaded": n, "totalBytes": n} (all but status optional).
     */
    String status();

    /** Starts (or joins) a model download; progress goes to the listener from any thread. */
    void download(DownloadListener listener);

    /**
     * Starts one generation and returns its id (for {@link #cancel}). {@code optionsJson} is a
     * JSON object with optional systemInstruction, temperature, topK, seed, maxOutputTokens.
     * Failures are reported through the sink, never thrown.
     */
    long generate(String prompt, String optionsJson, GenerationSink sink);

    /**
     * Asks a running generation to stop; its sink then gets one terminal call (onError with
     * CANCELLED, or onDone if it had already finished). Unknown ids are ignored.
     */
    void cancel(long requestId);

    /** Tokens in {@code text}, or -1 when the backend cannot count them. */
    int countTokens(String text);

    /** Input tokens the model accepts, or -1 when unknown. */
    int tokenLimit();

    /** Releases the model; running generations end with CANCELLED. */
    void close();
}
