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
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
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
 * <p>One conversation kept across generations. A Conversation keeps its history (its KV cache)
 * and only appends: no reset, clone or rollback ({@code cancelProcess()} leaves the partial turn
 * in it, "b/450903294", Conversation.kt), the system instruction, sampler and output limit are
 * fixed at creation, and SessionBasic refuses a second live session per engine ("A session
 * already exists. Only one session is supported at a time.", runtime/core/session_basic.cc). So
 * {@link #converse} either continues the one live conversation with a single new user message
 * (the caller, oamd's Python side, has checked that everything else is what that conversation has
 * already seen) or drops it and opens a fresh one from the whole history (system instruction +
 * {@code initialMessages} + the last message).
 *
 * <p>Lifetimes:
 * <ul>
 *   <li>an engine that fails to load (any {@code Throwable}: a missing native library is an
 *       {@code UnsatisfiedLinkError}) leaves the backend unavailable, with the reason in
 *       {@link #status()};</li>
 *   <li>a generation that ends with {@code onDone} leaves its conversation live and idle (marked
 *       so before the sink hears of the end, so the next step can continue it at once); any
 *       other end (an error, a cancel, the watchdog, a failed send) drops it;</li>
 *   <li>a dropped conversation is closed on the single-thread {@code lifecycle} executor, only
 *       once its last decode has delivered its terminal callback and that callback has
 *       returned; never inside a callback. The wait is bounded: a decode that never ends (the
 *       watchdog's case) leaves its conversation open, logged, rather than closed under it;</li>
 *   <li>a fresh conversation is created on the same executor, after the close of the one it
 *       replaces: never two at once.</li>
 * </ul>
 */
public final class LiteRtBackend implements OamdBackend {
    /** Longest silence between two callbacks before the call is cancelled and failed. */
    public static final long WATCHDOG_MILLIS = 90_000;

    /** Longest wait for a decode's terminal callback before its conversation is closed (and so
     *  before a fresh one is opened in its place). */
    public static final long CLOSE_WAIT_MILLIS = 10_000;

    /** Grace for the library's thread to return from the terminal callback before close. */
    static final long CALLBACK_SETTLE_MILLIS = 50;

    private static final Logger LOG = Logger.getLogger("oamd.litert");

    private final Engine engine;
    private final String modelPath;
    private final int contextTokens;
    private final String loadError;
    private final long watchdogMillis;
    /** Set by close(): a conversation asked for after it is refused, not left in {@code running}. */
    private volatile boolean closing;
    private final ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor(
            daemon("oamd-litert-watchdog"));
    /** Opens and closes conversations, one at a time and in order. */
    private final ExecutorService lifecycle = Executors.newSingleThreadExecutor(daemon("oamd-litert-lifecycle"));
    private final Map<Long, Call> running = new ConcurrentHashMap<>();
    private final Object lock = new Object();
    /** The live conversation (guarded by {@code lock}), or null. */
    private Live live;
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
        return converse(0, false, new String[0], new String[0], prompt, optionsJson, given);
    }

    /**
     * One generation. {@code continues}: send {@code prompt} to the live conversation named
     * {@code conversation} (it fails the sink if that one is not live and idle); otherwise drop
     * the live one and open conversation {@code conversation} with the history ({@code roles}
     * "user" or "model", {@code texts}) as its initial messages, then send {@code prompt}.
     * {@code optionsJson} as for {@link #generate}. Returns the id for {@link #cancel}.
     */
    public long converse(long conversation, boolean continues, String[] roles, String[] texts,
            String prompt, String optionsJson, GenerationSink given) {
        // the library's callbacks go through the guard: no null String, nothing after the end
        GenerationSink sink = GuardedSink.wrap(given);
        long id = nextId.getAndIncrement();
        if (engine == null) {
            sink.onError(ErrorCodes.NOT_AVAILABLE, "LiteRT-LM could not load " + modelPath + ": " + loadError, 0);
            return id;
        }
        if (closing) {
            sink.onError(ErrorCodes.NOT_AVAILABLE, "LiteRT-LM is closed", 0);
            return id;
        }
        Call call = new Call(id, sink);
        if (continues) {
            Live l;
            synchronized (lock) {
                l = live;
                if (l == null || l.key != conversation || l.busy) l = null;
                else l.attach(call);
            }
            if (l == null) {
                sink.onError(ErrorCodes.UNKNOWN, "conversation " + conversation + " is not live", 0);
                return id;
            }
            call.live = l;
            start(call, prompt);
            return id;
        }
        ConversationConfig config;
        try {
            config = config(new JSONObject(optionsJson), roles, texts);
        } catch (Throwable ex) {
            sink.onError(ErrorCodes.REQUEST_PROCESSING_ERROR, "bad request: " + ex, 0);
            return id;
        }
        dropLive(); // its close is queued before the open below: never two conversations
        running.put(id, call);
        call.arm();
        try {
            lifecycle.execute(() -> open(call, conversation, config, prompt));
        } catch (Throwable t) { // the backend is closing
            call.finish(() -> sink.onError(ErrorCodes.NOT_AVAILABLE, "LiteRT-LM is closing", 0), false);
            call.decodeEnded();
        }
        return id;
    }

    private static ConversationConfig config(JSONObject o, String[] roles, String[] texts) {
        String system = o.optString("systemInstruction", "");
        SamplerConfig sampler = new SamplerConfig(Math.max(1, o.optInt("topK", 40)), 0.95,
                Math.max(0.0, o.optDouble("temperature", 0.8)), o.optInt("seed", 0));
        int maxOut = o.optInt("maxOutputTokens", 0);
        List<Message> history = new ArrayList<>();
        for (int i = 0; i < roles.length; i++) {
            history.add("model".equals(roles[i]) ? Message.Companion.model(texts[i])
                    : Message.Companion.user(texts[i]));
        }
        // ConversationConfig.maxOutputToken: "the maximum number of output tokens per decode
        // step" (positive or null for the model's default); SamplerConfig has no such field
        return new ConversationConfig(system.isEmpty() ? null : Contents.Companion.of(system),
                history, Collections.emptyList(), sampler, false,
                null, Collections.<String, Object>emptyMap(), null, false,
                maxOut > 0 ? maxOut : null);
    }

    /** On the lifecycle executor, after the close of the conversation it replaces. */
    private void open(Call call, long key, ConversationConfig config, String prompt) {
        if (call.ended.get()) return; // cancelled or timed out while waiting its turn
        Live old;
        synchronized (lock) { // one opened since this call dropped the live one (a race)
            old = live;
            if (old != null) {
                old.dropped = true;
                live = null;
            }
        }
        if (old != null) closeWhenDecodeEnded(old); // here: before the create, never after
        Live l;
        try {
            l = new Live(key, engine.createConversation(config));
        } catch (Throwable ex) { // e.g. one left open after its decode outlived the close wait
            call.finish(() -> call.sink.onError(ErrorCodes.UNKNOWN, "could not open a conversation: " + ex, 0), false);
            call.decodeEnded();
            return;
        }
        boolean starts;
        synchronized (call) { // one step with cancelDecode: a cancel sees the conversation or none
            starts = !call.cancelRequested && !call.ended.get();
            if (starts) call.live = l;
        }
        if (!starts) {
            // cancelled, timed out or closed while it was being created: its canceller saw no
            // decode and ends the call itself; nothing ever ran on this conversation, so it is
            // closed here, at once (the backend's close may have shut this executor already)
            closeUnused(l);
            return;
        }
        synchronized (lock) {
            l.attach(call);
            live = l;
        }
        start(call, prompt);
    }

    /** Closes a conversation no decode ran on; on the lifecycle executor. */
    private static void closeUnused(Live l) {
        try {
            l.conversation.close();
        } catch (Throwable t) {
            LOG.log(Level.WARNING, "closing conversation " + l.key, t);
        }
    }

    private void start(Call call, String prompt) {
        running.put(call.id, call);
        call.arm();
        try {
            call.live.conversation.sendMessageAsync(prompt, call);
        } catch (Throwable ex) {
            call.decodeEnded(); // nothing was started
            call.finish(() -> call.sink.onError(ErrorCodes.UNKNOWN, "could not send the message: " + ex, 0), false);
            return;
        }
        // a cancel that came between attach and send was cleared by the send's new turn
        if (call.cancelRequested) call.cancelDecode();
    }

    /** Drops the live conversation, if any. */
    private void dropLive() {
        Live l;
        synchronized (lock) {
            l = live;
        }
        if (l != null) drop(l);
    }

    /** Drops {@code l} (once): it stops being live and its close is queued (it waits for its
     *  last decode's end). */
    private void drop(Live l) {
        synchronized (lock) {
            if (l.dropped) return;
            l.dropped = true;
            if (live == l) live = null;
            // queued under the lock: a generation that sees no live conversation from now on
            // queues its open after this close (queued after the lock, a concurrent open could
            // overtake it and find the engine's one session still taken)
            try {
                lifecycle.execute(() -> closeWhenDecodeEnded(l));
            } catch (Throwable t) { // lifecycle shut down: the backend is closing
                LOG.log(Level.WARNING, "conversation " + l.key + " left open (closing)", t);
            }
        }
    }

    /** The engine's one conversation, kept between generations. Guarded by {@code lock}. */
    private static final class Live {
        final long key;
        final Conversation conversation;
        /** The latest generation: its decode must have ended before the close. */
        Call last;
        boolean busy;
        boolean dropped;

        Live(long key, Conversation conversation) {
            this.key = key;
            this.conversation = conversation;
        }

        void attach(Call call) {
            last = call;
            busy = true;
        }
    }

    /** One generation: its watchdog and the library's callback. */
    private final class Call implements MessageCallback {
        final long id;
        final GenerationSink sink;
        final AtomicBoolean ended = new AtomicBoolean(false);
        /** Counted down when the library's last callback for this decode is returning. */
        final CountDownLatch decodeDone = new CountDownLatch(1);
        volatile Thread callbackThread;
        volatile Live live;
        volatile boolean cancelRequested;
        private ScheduledFuture<?> watchdog;

        Call(long id, GenerationSink sink) {
            this.id = id;
            this.sink = sink;
        }

        void arm() {
            boolean closed = false;
            synchronized (this) {
                if (watchdog != null) watchdog.cancel(false);
                if (ended.get()) return;
                try {
                    watchdog = timers.schedule(this::fire, watchdogMillis, TimeUnit.MILLISECONDS);
                } catch (RejectedExecutionException e) { // close() ran meanwhile: none will end it
                    closed = true;
                }
            }
            if (closed) {
                boolean decoding = cancelDecode();
                finish(() -> sink.onError(ErrorCodes.NOT_AVAILABLE, "LiteRT-LM is closed", 0), false);
                if (!decoding) decodeEnded();
            }
        }

        private void fire() {
            boolean decoding = cancelDecode();
            finish(() -> sink.onError(ErrorCodes.UNKNOWN,
                    "no callback for " + watchdogMillis + " ms (watchdog)", 0), false);
            if (!decoding) decodeEnded();
        }

        /** Asks the decode to stop; false when no decode was started (nothing will call back). */
        boolean cancelDecode() {
            Live l;
            synchronized (this) { // open() starts no decode once this is set without a live
                cancelRequested = true; // before reading ended: see finish()
                l = ended.get() ? null : live; // ended: cancelling would hit its next turn
            }
            if (l == null) return false;
            try {
                l.conversation.cancelProcess();
            } catch (Throwable t) { // already closed
                LOG.log(Level.FINE, "cancelProcess", t);
            }
            return true;
        }

        @Override public void onMessage(Message message) {
            if (ended.get()) return;
            arm();
            sink.onChunk(message == null ? "" : message.toString());
        }

        @Override public void onDone() {
            try {
                finish(() -> sink.onDone(null, "STOP"), true);
            } finally {
                decodeEnded();
            }
        }

        @Override public void onError(Throwable t) {
            try {
                int code = t instanceof CancellationException ? ErrorCodes.CANCELLED : ErrorCodes.UNKNOWN;
                finish(() -> sink.onError(code, String.valueOf(t.getMessage()), 0), false);
            } finally {
                decodeEnded();
            }
        }

        void decodeEnded() {
            callbackThread = Thread.currentThread();
            decodeDone.countDown();
        }

        /**
         * The one terminal call. {@code keep}: the conversation stays live and idle, which is
         * settled before the sink hears of the end; otherwise it is dropped (its close queued,
         * never run here).
         */
        void finish(Runnable terminal, boolean keep) {
            if (!ended.compareAndSet(false, true)) return;
            synchronized (this) {
                if (watchdog != null) watchdog.cancel(false);
            }
            running.remove(id);
            Live l = live;
            if (l != null) {
                boolean kept = false;
                // a cancel that raced this end may have reached the conversation: not kept (it
                // set cancelRequested before it read ended, which was set above)
                if (keep && !cancelRequested) {
                    synchronized (lock) {
                        if (!l.dropped) {
                            l.busy = false;
                            kept = true;
                        }
                    }
                }
                if (!kept) drop(l);
            }
            terminal.run();
        }
    }

    private static void closeWhenDecodeEnded(Live l) {
        Call call = l.last;
        try {
            if (!call.decodeDone.await(CLOSE_WAIT_MILLIS, TimeUnit.MILLISECONDS)) {
                LOG.warning("conversation " + l.key + ": decode still running after "
                        + CLOSE_WAIT_MILLIS + " ms; left open rather than closed under it");
                return;
            }
            Thread t = call.callbackThread;
            if (t != null && t != Thread.currentThread()) t.join(CALLBACK_SETTLE_MILLIS);
            l.conversation.close();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Throwable t) {
            LOG.log(Level.WARNING, "closing conversation " + l.key, t);
        }
    }

    @Override
    public void cancel(long requestId) {
        Call c = running.get(requestId);
        if (c == null) return;
        if (!c.cancelDecode()) { // not started yet: no callback will come
            c.finish(() -> c.sink.onError(ErrorCodes.CANCELLED, "cancelled", 0), false);
            c.decodeEnded();
        }
    }

    @Override public int countTokens(String text) { return -1; }
    @Override public int tokenLimit() { return contextTokens; }

    @Override
    public void close() {
        closing = true;
        List<Call> calls = new ArrayList<>(running.values());
        for (Call c : calls) cancel(c.id);
        dropLive();
        boolean closed = true;
        try {
            // each cancelled decode ends with its terminal callback, which queues its close
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CLOSE_WAIT_MILLIS);
            for (Call c : calls) {
                long left = deadline - System.nanoTime();
                closed &= c.decodeDone.await(Math.max(0, left), TimeUnit.NANOSECONDS);
            }
            timers.shutdownNow();
            lifecycle.shutdown(); // queued closes still run; queued opens see their call ended
            closed &= lifecycle.awaitTermination(CLOSE_WAIT_MILLIS + 1_000, TimeUnit.MILLISECONDS);
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
