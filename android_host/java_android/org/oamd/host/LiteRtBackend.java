package org.oamd.host;

import com.google.ai.edge.litertlm.Backend;
import com.google.ai.edge.litertlm.Contents;
import com.google.ai.edge.litertlm.Conversation;
import com.google.ai.edge.litertlm.ConversationConfig;
import com.google.ai.edge.litertlm.Engine;
import com.google.ai.edge.litertlm.EngineConfig;
import com.google.ai.edge.litertlm.Message;
import com.google.ai.edge.litertlm.MessageCallback;
import com.google.ai.edge.litertlm.SamplerConfig;
import java.io.File;
import java.util.Collections;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.json.JSONObject;

/**
 * A LiteRT-LM model file run in-process ({@code Engine} / {@code Conversation}) behind the
 * {@link OamdBackend} contract, with automatic tool calling off (the tool loop is oamd's) and a
 * watchdog for a callback that never completes (LiteRT-LM#3266). Written against LiteRT-LM's
 * Kotlin API as seen from Java ({@code kotlin/java/com/google/ai/edge/litertlm/Config.kt},
 * {@code Engine.kt}, {@code Conversation.kt}) and run on the desktop only against the stubs'
 * fake engine: never on a device.
 *
 * <p>Lifetimes:
 * <ul>
 *   <li>an engine that fails to load (any {@code Throwable}: a missing native library is an
 *       {@code UnsatisfiedLinkError}) leaves the backend unavailable, with the reason in
 *       {@link #status()};</li>
 *   <li>a conversation is closed on its own single-thread executor, only once its decode has
 *       delivered its terminal callback (a cancelled decode keeps running until then) and that
 *       callback has returned; never inside a callback. The wait is bounded: a decode that never
 *       ends (the watchdog's case) leaves its conversation open, logged, rather than closed under
 *       a running decode.</li>
 * </ul>
 *
 * <p>Each generate() opens a fresh Conversation for the whole transcript. A Conversation keeps
 * its history (its KV cache grows with every message, {@code getTokenCount()}), but the API only
 * appends: it has no reset, clone or rollback ({@code cancelProcess()} leaves the partial turn in
 * the state; "b/450903294 is a pending feature request to roll the internal state back",
 * Conversation.kt), and the system instruction is fixed at creation. oamd sends one flattened
 * transcript per step ({@code render_prompt}), with a system text that may change per step and
 * assistant turns it may have rewritten, so appending would need a session key and the new
 * messages only from the Python side; until then every step re-prefills.
 */
public final class LiteRtBackend implements OamdBackend {
    /** Longest silence between two callbacks before the call is cancelled and failed. */
    public static final long WATCHDOG_MILLIS = 90_000;

    /** Longest wait for a decode's terminal callback before its conversation is closed. */
    public static final long CLOSE_WAIT_MILLIS = 10_000;

    /** Grace for the library's thread to return from the terminal callback before close. */
    static final long CALLBACK_SETTLE_MILLIS = 50;

    private static final Logger LOG = Logger.getLogger("oamd.litert");

    private final Engine engine;
    private final String modelPath;
    private final int contextTokens;
    private final String loadError;
    private final long watchdogMillis;
    private final ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor(
            daemon("oamd-litert-watchdog"));
    private final ExecutorService closer = Executors.newSingleThreadExecutor(daemon("oamd-litert-close"));
    private final Map<Long, Call> running = new ConcurrentHashMap<>();
    private final AtomicLong nextId = new AtomicLong(1);

    public LiteRtBackend(String modelPath, String cacheDir, int contextTokens) {
        this(modelPath, cacheDir, contextTokens, WATCHDOG_MILLIS);
    }

    /** As above with another watchdog (tests). */
    public LiteRtBackend(String modelPath, String cacheDir, int contextTokens, long watchdogMillis) {
        this.watchdogMillis = watchdogMillis;
        this.modelPath = modelPath;
        this.contextTokens = contextTokens;
        Engine e = null;
        String error = null;
        try {
            e = new Engine(new EngineConfig(modelPath, new Backend.CPU(), null, null,
                    contextTokens > 0 ? contextTokens : null, null, usableCacheDir(cacheDir)));
            e.initialize();
        } catch (Throwable t) { // UnsatisfiedLinkError, OutOfMemoryError, a bad model file...
            LOG.log(Level.WARNING, "LiteRT-LM could not load " + modelPath, t);
            error = t.getClass().getSimpleName() + ": " + t.getMessage();
            e = null;
        }
        this.engine = e;
        this.loadError = error;
    }

    /** {@code cacheDir}, created if missing, or null (the library's default) if it cannot be. */
    private static String usableCacheDir(String cacheDir) {
        if (cacheDir == null || cacheDir.isEmpty()) return null;
        File dir = new File(cacheDir);
        if (dir.isDirectory() || dir.mkdirs()) return cacheDir;
        LOG.warning("cannot create the LiteRT-LM cache directory " + cacheDir);
        return null;
    }

    @Override
    public String status() {
        JSONObject o = new JSONObject();
        try {
            if (engine == null) {
                o.put("status", "unavailable");
                o.put("code", ErrorCodes.NOT_AVAILABLE);
                o.put("detail", "LiteRT-LM could not load " + modelPath + ": " + loadError);
            } else {
                o.put("status", "available");
                o.put("contextSize", contextTokens);
            }
        } catch (Exception ex) {
            throw new IllegalStateException(ex);
        }
        return o.toString();
    }

    @Override
    public void download(DownloadListener listener) {
        // model files are shipped or side-loaded by the app; nothing to download here
        if (engine != null) listener.onCompleted();
        else listener.onError(ErrorCodes.NOT_AVAILABLE, "LiteRT-LM could not load " + modelPath + ": " + loadError);
    }

    @Override
    public long generate(String prompt, String optionsJson, GenerationSink given) {
        // the library's callbacks go through the guard: no null String, nothing after the end
        GenerationSink sink = GuardedSink.wrap(given);
        long id = nextId.getAndIncrement();
        if (engine == null) {
            sink.onError(ErrorCodes.NOT_AVAILABLE, "LiteRT-LM could not load " + modelPath + ": " + loadError, 0);
            return id;
        }
        Conversation conversation;
        try {
            JSONObject o = new JSONObject(optionsJson);
            String system = o.optString("systemInstruction", "");
            SamplerConfig sampler = new SamplerConfig(Math.max(1, o.optInt("topK", 40)), 0.95,
                    Math.max(0.0, o.optDouble("temperature", 0.8)), o.optInt("seed", 0));
            int maxOut = o.optInt("maxOutputTokens", 0);
            // ConversationConfig.maxOutputToken: "the maximum number of output tokens per decode
            // step" (positive or null for the model's default); SamplerConfig has no such field
            conversation = engine.createConversation(new ConversationConfig(
                    system.isEmpty() ? null : Contents.Companion.of(system),
                    Collections.emptyList(), Collections.emptyList(), sampler, false,
                    null, Collections.<String, Object>emptyMap(), null, false,
                    maxOut > 0 ? maxOut : null));
        } catch (Throwable ex) {
            sink.onError(ErrorCodes.REQUEST_PROCESSING_ERROR, "bad request: " + ex, 0);
            return id;
        }
        Call call = new Call(id, conversation, sink);
        running.put(id, call);
        call.arm();
        try {
            conversation.sendMessageAsync(prompt, call);
        } catch (Throwable ex) {
            call.decodeEnded(); // nothing was started
            call.finish(() -> sink.onError(ErrorCodes.REQUEST_PROCESSING_ERROR, "bad request: " + ex, 0));
        }
        return id;
    }

    /** One generation: its conversation, its watchdog and the library's callback. */
    private final class Call implements MessageCallback {
        final long id;
        final Conversation conversation;
        final GenerationSink sink;
        final AtomicBoolean ended = new AtomicBoolean(false);
        /** Counted down when the library's last callback for this decode is returning. */
        final CountDownLatch decodeDone = new CountDownLatch(1);
        volatile Thread callbackThread;
        private ScheduledFuture<?> watchdog;

        Call(long id, Conversation conversation, GenerationSink sink) {
            this.id = id;
            this.conversation = conversation;
            this.sink = sink;
        }

        synchronized void arm() {
            if (watchdog != null) watchdog.cancel(false);
            if (!ended.get()) watchdog = timers.schedule(this::fire, watchdogMillis, TimeUnit.MILLISECONDS);
        }

        private void fire() {
            cancelDecode();
            finish(() -> sink.onError(ErrorCodes.UNKNOWN,
                    "no callback for " + watchdogMillis + " ms (watchdog)", 0));
        }

        void cancelDecode() {
            try {
                conversation.cancelProcess();
            } catch (Throwable t) { // already closed
                LOG.log(Level.FINE, "cancelProcess", t);
            }
        }

        @Override public void onMessage(Message message) {
            if (ended.get()) return;
            arm();
            sink.onChunk(message == null ? "" : message.toString());
        }

        @Override public void onDone() {
            try {
                finish(() -> sink.onDone(null, "STOP"));
            } finally {
                decodeEnded();
            }
        }

        @Override public void onError(Throwable t) {
            try {
                int code = t instanceof CancellationException ? ErrorCodes.CANCELLED : ErrorCodes.UNKNOWN;
                finish(() -> sink.onError(code, String.valueOf(t.getMessage()), 0));
            } finally {
                decodeEnded();
            }
        }

        void decodeEnded() {
            callbackThread = Thread.currentThread();
            decodeDone.countDown();
        }

        /** The one terminal call, then the conversation's close queued (never run here). */
        void finish(Runnable terminal) {
            if (!ended.compareAndSet(false, true)) return;
            synchronized (this) {
                if (watchdog != null) watchdog.cancel(false);
            }
            running.remove(id);
            try {
                terminal.run();
            } finally {
                scheduleClose(this);
            }
        }
    }

    private void scheduleClose(Call call) {
        try {
            closer.execute(() -> closeWhenDecodeEnded(call));
        } catch (Throwable t) { // closer shut down: the backend is closing
            LOG.log(Level.WARNING, "conversation " + call.id + " left open (closing)", t);
        }
    }

    private static void closeWhenDecodeEnded(Call call) {
        try {
            if (!call.decodeDone.await(CLOSE_WAIT_MILLIS, TimeUnit.MILLISECONDS)) {
                LOG.warning("conversation " + call.id + ": decode still running after "
                        + CLOSE_WAIT_MILLIS + " ms; left open rather than closed under it");
                return;
            }
            Thread t = call.callbackThread;
            if (t != null && t != Thread.currentThread()) t.join(CALLBACK_SETTLE_MILLIS);
            call.conversation.close();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Throwable t) {
            LOG.log(Level.WARNING, "closing conversation " + call.id, t);
        }
    }

    @Override
    public void cancel(long requestId) {
        Call c = running.get(requestId);
        if (c != null) c.cancelDecode();
    }

    @Override public int countTokens(String text) { return -1; }
    @Override public int tokenLimit() { return contextTokens; }

    @Override
    public void close() {
        java.util.List<Call> calls = new java.util.ArrayList<>(running.values());
        for (Call c : calls) c.cancelDecode();
        boolean closed = true;
        try {
            // each cancelled decode ends with its terminal callback, which queues its close
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CLOSE_WAIT_MILLIS);
            for (Call c : calls) {
                long left = deadline - System.nanoTime();
                closed &= c.decodeDone.await(Math.max(0, left), TimeUnit.NANOSECONDS);
            }
            timers.shutdownNow();
            closer.shutdown(); // queued closes still run
            closed &= closer.awaitTermination(CLOSE_WAIT_MILLIS + 1_000, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            closed = false;
        }
        if (engine == null) return;
        if (!closed) {
            LOG.warning("LiteRT-LM engine left open: conversations still running");
            return;
        }
        try {
            engine.close();
        } catch (Throwable t) {
            LOG.log(Level.WARNING, "closing the LiteRT-LM engine", t);
        }
    }

    private static java.util.concurrent.ThreadFactory daemon(String name) {
        return r -> {
            Thread t = new Thread(r, name);
            t.setDaemon(true);
            return t;
        };
    }
}
