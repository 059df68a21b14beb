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
import java.util.Collections;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CancellationException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.json.JSONObject;

/**
 * A LiteRT-LM model file run in-process ({@code Engine} / {@code Conversation}) behind the
 * {@link OamdBackend} contract, with automatic tool calling off (the tool loop is oamd's) and a
 * watchdog for a callback that never completes (LiteRT-LM#3266). Written against the documented
 * Kotlin API as seen from Java (android-host.md §4) and compile-checked on the desktop only
 * against hand-written stubs: never run on a device.
 *
 * <p>Each generate() opens a fresh Conversation: oamd sends the whole transcript every step.
 */
public final class LiteRtBackend implements OamdBackend {
    /** Longest silence between two callbacks before the call is cancelled and failed. */
    public static final long WATCHDOG_MILLIS = 90_000;

    private final Engine engine;
    private final String modelPath;
    private final int contextTokens;
    private final ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor();
    private final Map<Long, Conversation> running = new ConcurrentHashMap<>();
    private final AtomicLong nextId = new AtomicLong(1);
    private volatile String loadError;

    public LiteRtBackend(String modelPath, String cacheDir, int contextTokens) {
        this.modelPath = modelPath;
        this.contextTokens = contextTokens;
        Engine e = null;
        try {
            e = new Engine(new EngineConfig(modelPath, new Backend.CPU(), null, null,
                    contextTokens, null, cacheDir));
            e.initialize();
        } catch (RuntimeException ex) {
            loadError = String.valueOf(ex);
        }
        this.engine = e;
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
        else listener.onError(ErrorCodes.NOT_AVAILABLE, "no model file at " + modelPath);
    }

    @Override
    public long generate(String prompt, String optionsJson, GenerationSink given) {
        // the library's callbacks go through the guard: no null String, nothing after the end
        GenerationSink sink = GuardedSink.wrap(given);
        long id = nextId.getAndIncrement();
        if (engine == null) {
            sink.onError(ErrorCodes.NOT_AVAILABLE, "LiteRT-LM model not loaded: " + loadError, 0);
            return id;
        }
        AtomicBoolean ended = new AtomicBoolean(false);
        Conversation conversation;
        try {
            JSONObject o = new JSONObject(optionsJson);
            String system = o.optString("systemInstruction", "");
            SamplerConfig sampler = new SamplerConfig(o.optInt("topK", 40), 0.95,
                    o.optDouble("temperature", 0.8), o.optInt("seed", 0));
            conversation = engine.createConversation(new ConversationConfig(
                    system.isEmpty() ? null : Contents.Companion.of(system),
                    Collections.emptyList(), Collections.emptyList(), sampler, false));
        } catch (Exception ex) {
            sink.onError(ErrorCodes.REQUEST_PROCESSING_ERROR, "bad request: " + ex, 0);
            return id;
        }
        running.put(id, conversation);
        final ScheduledFuture<?>[] watchdog = new ScheduledFuture<?>[1];
        Runnable fire = () -> {
            conversation.cancelProcess();
            finish(id, ended, watchdog, () -> sink.onError(ErrorCodes.UNKNOWN,
                    "no callback for " + WATCHDOG_MILLIS + " ms (watchdog)", 0));
        };
        watchdog[0] = timers.schedule(fire, WATCHDOG_MILLIS, TimeUnit.MILLISECONDS);
        conversation.sendMessageAsync(prompt, new MessageCallback() {
            @Override public void onMessage(Message message) {
                if (ended.get()) return;
                synchronized (watchdog) {
                    watchdog[0].cancel(false);
                    watchdog[0] = timers.schedule(fire, WATCHDOG_MILLIS, TimeUnit.MILLISECONDS);
                }
                sink.onChunk(message.toString());
            }
            @Override public void onDone() {
                finish(id, ended, watchdog, () -> sink.onDone(null, "STOP"));
            }
            @Override public void onError(Throwable t) {
                int code = t instanceof CancellationException ? ErrorCodes.CANCELLED : ErrorCodes.UNKNOWN;
                finish(id, ended, watchdog, () -> sink.onError(code, String.valueOf(t.getMessage()), 0));
            }
        });
        return id;
    }

    private void finish(long id, AtomicBoolean ended, ScheduledFuture<?>[] watchdog, Runnable terminal) {
        if (!ended.compareAndSet(false, true)) return;
        synchronized (watchdog) {
            watchdog[0].cancel(false);
        }
        Conversation c = running.remove(id);
        if (c != null) c.close();
        terminal.run();
    }

    @Override
    public void cancel(long requestId) {
        Conversation c = running.get(requestId);
        if (c != null) c.cancelProcess();
    }

    @Override public int countTokens(String text) { return -1; }
    @Override public int tokenLimit() { return contextTokens; }

    @Override
    public void close() {
        for (Conversation c : running.values()) c.cancelProcess();
        timers.shutdownNow();
        if (engine != null) engine.close();
    }
}
