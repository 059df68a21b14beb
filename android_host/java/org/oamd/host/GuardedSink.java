package org.oamd.host;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * The sink every backend hands to its library instead of the one it was given. The sink oamd
 * gives is a Python object behind pyjnius, and that boundary kills the process on two mistakes
 * the libraries can make, so they are made impossible here, on the Java side:
 * <ul>
 *   <li>a {@code null} String passed to a Python-implemented method crashes the JVM inside
 *       pyjnius: a null chunk or message becomes "", a null usage "{}", a null finish reason
 *       "OTHER";</li>
 *   <li>a call after the terminal one reaches a Python object that was released on that terminal
 *       call (a use after free): everything after the terminal call is dropped and counted.</li>
 * </ul>
 * Calls are serialised, since the libraries' callback threads can race (ML Kit's stream callback
 * against its future's completion, LiteRT-LM's onMessage against the watchdog's cancel).
 */
public final class GuardedSink implements GenerationSink {
    private static final AtomicInteger DROPPED = new AtomicInteger();

    private GenerationSink inner;
    private int dropped;

    private GuardedSink(GenerationSink inner) {
        this.inner = inner;
    }

    /** {@code sink} guarded (a sink already guarded is returned as it is). */
    public static GenerationSink wrap(GenerationSink sink) {
        if (sink == null) throw new IllegalArgumentException("sink is null");
        return sink instanceof GuardedSink ? sink : new GuardedSink(sink);
    }

    @Override
    public synchronized void onChunk(String text) {
        GenerationSink target = inner;
        if (target == null) {
            drop();
            return;
        }
        target.onChunk(text == null ? "" : text);
    }

    @Override
    public synchronized void onDone(String usageJson, String finishReason) {
        GenerationSink target = takeForTerminal();
        if (target != null) {
            target.onDone(usageJson == null ? "{}" : usageJson,
                    finishReason == null ? "OTHER" : finishReason);
        }
    }

    @Override
    public synchronized void onError(int code, String message, long retryAfterMillis) {
        GenerationSink target = takeForTerminal();
        if (target != null) target.onError(code, message == null ? "" : message, retryAfterMillis);
    }

    /** Calls this guard dropped (they came after the terminal call). */
    public synchronized int droppedCalls() {
        return dropped;
    }

    /** Calls every guard of this process dropped. */
    public static int droppedTotal() {
        return DROPPED.get();
    }

    private GenerationSink takeForTerminal() {
        GenerationSink target = inner;
        inner = null; // the inner sink is released by its terminal call: never reach it again
        if (target == null) drop();
        return target;
    }

    private void drop() {
        dropped++;
        DROPPED.incrementAndGet();
    }
}
