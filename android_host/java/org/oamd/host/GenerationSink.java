package org.oamd.host;

/**
 * Receives one streamed generation. A backend calls {@link #onChunk} zero or more times, then
 * exactly one terminal method ({@link #onDone} or {@link #onError}), from any thread, never
 * concurrently for the same request, and never again after the terminal call. The sink oamd
 * passes is a Python object, where breaking these rules (or passing a null String) kills the
 * process: backends hand their libraries {@link GuardedSink#wrap} of it, which enforces them.
 */
public interface GenerationSink {
    /** A text delta (not the text so far). */
    void onChunk(String text);

    /**
     * The generation finished. {@code usageJson} is a JSON object
     * ({"inputTokens":n,"outputTokens":n}, either may be missing) or null when unknown;
     * {@code finishReason} is STOP, MAX_TOKENS or OTHER.
     */
    void onDone(String usageJson, String finishReason);

    /**
     * The generation failed with one of {@link ErrorCodes}. {@code retryAfterMillis} is the
     * delay the model asked for (BUSY, quotas), or 0 when it gave none.
     */
    void onError(int code, String message, long retryAfterMillis);
}
