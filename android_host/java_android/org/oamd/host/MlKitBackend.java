package org.oamd.host;

import android.content.Context;
import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.mlkit.common.MlKit;
import com.google.mlkit.genai.common.DownloadCallback;
import com.google.mlkit.genai.common.FeatureStatus;
import com.google.mlkit.genai.common.GenAiException;
import com.google.mlkit.genai.prompt.Candidate;
import com.google.mlkit.genai.prompt.GenerateContentRequest;
import com.google.mlkit.genai.prompt.GenerateContentResponse;
import com.google.mlkit.genai.prompt.Generation;
import com.google.mlkit.genai.prompt.GenerativeModel;
import com.google.mlkit.genai.prompt.SystemInstruction;
import com.google.mlkit.genai.prompt.TextPart;
import com.google.mlkit.genai.prompt.java.GenerativeModelFutures;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.json.JSONObject;

/**
 * Gemini Nano through ML Kit's GenAI Prompt API ({@code GenerativeModelFutures}), behind the
 * {@link OamdBackend} contract. Written against the documented signatures (android-host.md §3)
 * and compile-checked on the desktop only against hand-written stubs: never run on a device.
 *
 * <p>Failures pass ML Kit's {@code GenAiException} codes through unchanged (the Python side owns
 * the table); the cause chain is searched up to 8 levels, as open-android-models does.
 *
 * <p>ML Kit initialises itself through a content provider in the app's main process only; oamd
 * runs in the {@code :service} process, so the constructor initialises it with the service's
 * Context first (once per process; a refused second initialisation is ignored). When the model
 * refuses a {@code SystemInstruction} (at build time, or by failing the generation before any
 * text), the system text goes at the head of the prompt instead, for this and later requests.
 */
public final class MlKitBackend implements OamdBackend {
    private static final int MAX_CAUSE_DEPTH = 8;
    private static final int MAX_OUTPUT_TOKENS = 4096;

    private final GenerativeModelFutures model;
    private final Executor callbacks = Executors.newSingleThreadExecutor();
    private final Map<Long, ListenableFuture<GenerateContentResponse>> running = new ConcurrentHashMap<>();
    private final AtomicLong nextId = new AtomicLong(1);
    private static final AtomicBoolean mlKitInitialized = new AtomicBoolean(false);
    private volatile boolean systemInstructionRefused = false;
    private volatile long bytesToDownload = -1;
    private volatile long bytesDownloaded = -1;

    /** {@code context}: the service (any Context of this process). */
    public MlKitBackend(Context context) {
        initializeMlKit(context);
        GenerativeModel client = Generation.INSTANCE.getClient();
        this.model = GenerativeModelFutures.from(client);
    }

    /**
     * Initialises ML Kit for this process before any client is made (its no-Context clients
     * throw "MlKitContext has not been initialized" outside the main process). Harmless twice:
     * only the first call of the process initialises, and an IllegalStateException from ML Kit
     * (initialised already, e.g. by its provider in the main process) is ignored.
     */
    static void initializeMlKit(Context context) {
        if (!mlKitInitialized.compareAndSet(false, true)) return;
        try {
            MlKit.initialize(context);
        } catch (IllegalStateException alreadyInitialized) {
            // the provider (or another embedder) got there first: ML Kit is ready either way
        }
    }

    @Override
    public String status() {
        JSONObject out = new JSONObject();
        try {
            int status = model.checkStatus().get(30, TimeUnit.SECONDS);
            switch (status) {
                case FeatureStatus.AVAILABLE:
                    put(out, "status", "available");
                    Integer limit = model.getTokenLimit().get(30, TimeUnit.SECONDS);
                    if (limit != null && limit > 0) put(out, "contextSize", limit);
                    put(out, "maxOutputTokens", MAX_OUTPUT_TOKENS);
                    break;
                case FeatureStatus.DOWNLOADABLE:
                    put(out, "status", "downloadable");
                    break;
                case FeatureStatus.DOWNLOADING:
                    put(out, "status", "downloading");
                    if (bytesDownloaded >= 0) put(out, "bytesDownloaded", bytesDownloaded);
                    if (bytesToDownload >= 0) put(out, "totalBytes", bytesToDownload);
                    break;
                case FeatureStatus.UNAVAILABLE:
                    put(out, "status", "unavailable");
                    put(out, "detail", "Gemini Nano is not supported on this device");
                    break;
                default:
                    put(out, "status", "unavailable");
                    put(out, "reason", "unknown");
                    put(out, "detail", "unknown ML Kit status " + status);
            }
        } catch (Exception e) {
            GenAiException g = findGenAi(e);
            put(out, "status", "unavailable");
            if (g != null) put(out, "code", g.getErrorCode());
            else put(out, "reason", "unknown");
            put(out, "detail", String.valueOf(e.getMessage()));
        }
        return out.toString();
    }

    @Override
    public void download(DownloadListener given) {
        // one terminal call whichever of the callback and the future reports the end first;
        // nothing reaches the (Python) listener after it, not even a progress call racing the end
        DownloadListener listener = new EndOnce(given);
        ListenableFuture<Void> done = model.download(new DownloadCallback() {
            @Override public void onDownloadStarted(long total) {
                bytesToDownload = total;
                bytesDownloaded = 0;
                listener.onProgress(0, total);
            }
            @Override public void onDownloadProgress(long downloaded) {
                bytesDownloaded = downloaded;
                listener.onProgress(downloaded, bytesToDownload);
            }
            @Override public void onDownloadCompleted() {
                listener.onCompleted();
            }
            @Override public void onDownloadFailed(GenAiException e) {
                listener.onError(e.getErrorCode(), String.valueOf(e.getMessage()));
            }
        });
        Futures.addCallback(done, new FutureCallback<Void>() {
            @Override public void onSuccess(Void v) {
                listener.onCompleted();
            }
            @Override public void onFailure(Throwable t) {
                GenAiException g = findGenAi(t);
                if (g != null) listener.onError(g.getErrorCode(), String.valueOf(g.getMessage()));
                else listener.onError(ErrorCodes.UNKNOWN, String.valueOf(t));
            }
        }, callbacks);
    }

    /** Serialises a download's reports and drops everything after the first end: the check and
     *  the call are one step under the lock, so a progress report on another thread cannot slip
     *  in after the end (the Python listener may be released by then). */
    private static final class EndOnce implements DownloadListener {
        private final DownloadListener listener;
        private boolean over;

        EndOnce(DownloadListener listener) {
            this.listener = listener;
        }

        @Override public synchronized void onProgress(long downloaded, long total) {
            if (!over) listener.onProgress(downloaded, total);
        }

        @Override public synchronized void onCompleted() {
            if (over) return;
            over = true;
            listener.onCompleted();
        }

        @Override public synchronized void onError(int code, String message) {
            if (over) return;
            over = true;
            listener.onError(code, message == null ? "" : message);
        }
    }

    @Override
    public long generate(String prompt, String optionsJson, GenerationSink given) {
        // the library's callbacks go through the guard: no null String, nothing after the end
        GenerationSink sink = GuardedSink.wrap(given);
        long id = nextId.getAndIncrement();
        JSONObject options;
        try {
            options = new JSONObject(optionsJson);
        } catch (Exception e) {
            sink.onError(ErrorCodes.REQUEST_PROCESSING_ERROR, "bad request: " + e, 0);
            return id;
        }
        start(id, prompt, options, sink, new AtomicBoolean(false));
        return id;
    }

    /** One attempt; a refused SystemInstruction before any text makes a second, inline one. */
    private void start(long id, String prompt, JSONObject options, GenerationSink sink,
                       AtomicBoolean ended) {
        GenerateContentRequest request;
        boolean withSystem;
        try {
            withSystem = !systemInstructionRefused && !options.optString("systemInstruction", "").isEmpty();
            request = request(prompt, options, withSystem);
            if (request == null) { // the builder refused the system instruction
                systemInstructionRefused = true;
                withSystem = false;
                request = request(prompt, options, false);
            }
        } catch (Exception e) {
            running.remove(id);
            sink.onError(ErrorCodes.REQUEST_PROCESSING_ERROR, "bad request: " + e, 0);
            return;
        }
        final boolean systemSent = withSystem;
        AtomicBoolean streamed = new AtomicBoolean(false);
        // the streaming callback delivers deltas on ML Kit's thread; the future ends the call
        ListenableFuture<GenerateContentResponse> future =
                model.generateContent(request, delta -> {
                    if (ended.get()) return;
                    streamed.set(true);
                    sink.onChunk(delta);
                });
        running.put(id, future);
        Futures.addCallback(future, new FutureCallback<GenerateContentResponse>() {
            @Override public void onSuccess(GenerateContentResponse response) {
                running.remove(id);
                if (ended.compareAndSet(false, true)) sink.onDone(null, finishReason(response));
            }
            @Override public void onFailure(Throwable t) {
                if (systemSent && !streamed.get() && !ended.get() && refusesSystemInstruction(t)
                        && running.remove(id, future)) {
                    systemInstructionRefused = true;
                    start(id, prompt, options, sink, ended); // same id: cancel still reaches it
                    return;
                }
                running.remove(id);
                if (!ended.compareAndSet(false, true)) return;
                GenAiException g = findGenAi(t);
                if (g != null) {
                    Long delay = g.getRetryDelay() == null ? null : g.getRetryDelay().toMillis();
                    sink.onError(g.getErrorCode(), String.valueOf(g.getMessage()),
                            delay == null ? 0 : Math.max(0, delay));
                } else if (t instanceof java.util.concurrent.CancellationException) {
                    sink.onError(ErrorCodes.CANCELLED, "cancelled", 0);
                } else {
                    sink.onError(ErrorCodes.UNKNOWN, String.valueOf(t), 0);
                }
            }
        }, callbacks);
    }

    /** True when t (or a cause) says the model does not take a system instruction. */
    static boolean refusesSystemInstruction(Throwable t) {
        for (int depth = 0; t != null && depth < MAX_CAUSE_DEPTH; depth++, t = t.getCause()) {
            String m = String.valueOf(t.getMessage()).toLowerCase(java.util.Locale.ROOT);
            if (m.contains("systeminstruction") || m.contains("system instruction")) return true;
        }
        return false;
    }

    /**
     * The request; with {@code withSystem} false, a system text goes at the head of the prompt.
     * Null when the builder refused the system instruction.
     */
    private static GenerateContentRequest request(String prompt, JSONObject o, boolean withSystem) {
        try {
            return build(prompt, o, withSystem);
        } catch (RuntimeException e) {
            if (withSystem && refusesSystemInstruction(e)) return null;
            throw e;
        }
    }

    private static GenerateContentRequest build(String prompt, JSONObject o, boolean withSystem) {
        GenerateContentRequest.Builder b;
        String system = o.optString("systemInstruction", "");
        if (withSystem) {
            b = new GenerateContentRequest.Builder(new SystemInstruction(system), new TextPart(prompt));
        } else if (!system.isEmpty()) {
            b = new GenerateContentRequest.Builder(new TextPart(system + "\n\n" + prompt));
        } else {
            b = new GenerateContentRequest.Builder(new TextPart(prompt));
        }
        if (o.has("temperature")) b.setTemperature((float) o.optDouble("temperature"));
        if (o.has("topK")) b.setTopK(o.optInt("topK"));
        if (o.has("seed")) b.setSeed(o.optInt("seed") & Integer.MAX_VALUE);
        int max = Math.min(Math.max(o.optInt("maxOutputTokens", MAX_OUTPUT_TOKENS), 1), MAX_OUTPUT_TOKENS);
        b.setMaxOutputTokens(max);
        b.setCandidateCount(1);
        return b.build();
    }

    private static String finishReason(GenerateContentResponse response) {
        List<Candidate> candidates = response.getCandidates();
        if (candidates == null || candidates.isEmpty()) return "OTHER";
        Integer reason = candidates.get(0).getFinishReason();
        if (reason == null || reason == Candidate.FinishReason.STOP) return "STOP";
        if (reason == Candidate.FinishReason.MAX_TOKENS) return "MAX_TOKENS";
        return "OTHER";
    }

    private static GenAiException findGenAi(Throwable t) {
        for (int depth = 0; t != null && depth < MAX_CAUSE_DEPTH; depth++, t = t.getCause()) {
            if (t instanceof GenAiException) return (GenAiException) t;
        }
        return null;
    }

    private static void put(JSONObject o, String key, Object value) {
        try {
            o.put(key, value);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public void cancel(long requestId) {
        ListenableFuture<GenerateContentResponse> f = running.get(requestId);
        if (f != null) f.cancel(true);
    }

    @Override
    public int countTokens(String text) {
        try {
            return model.countTokens(new GenerateContentRequest.Builder(new TextPart(text)).build())
                    .get(30, TimeUnit.SECONDS).getTotalTokens();
        } catch (Exception e) {
            return -1;
        }
    }

    @Override
    public int tokenLimit() {
        try {
            Integer limit = model.getTokenLimit().get(30, TimeUnit.SECONDS);
            return limit == null ? -1 : limit;
        } catch (Exception e) {
            return -1;
        }
    }

    @Override
    public void close() {
        for (ListenableFuture<GenerateContentResponse> f : running.values()) f.cancel(true);
        model.getGenerativeModel().close();
    }
}
