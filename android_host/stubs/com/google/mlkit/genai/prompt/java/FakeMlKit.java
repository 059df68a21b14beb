package com.google.mlkit.genai.prompt.java;

import android.content.Context;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.mlkit.genai.common.DownloadCallback;
import com.google.mlkit.genai.common.FeatureStatus;
import com.google.mlkit.genai.common.GenAiException;
import com.google.mlkit.genai.common.StreamingCallback;
import com.google.mlkit.genai.prompt.CountTokensResponse;
import com.google.mlkit.genai.prompt.GenerateContentRequest;
import com.google.mlkit.genai.prompt.GenerateContentResponse;
import com.google.mlkit.genai.prompt.GenerativeModel;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Test-only (not in the real library): a {@link GenerativeModelFutures} a test drives step by
 * step. ML Kit reports a download's end twice, through the {@link DownloadCallback} and through
 * the returned future, on threads of its own and in no promised order; here each of the two is
 * played when the test says, from the calling thread ({@link #race} plays both at once). A
 * generation streams {@link #setReply}'s text and completes, unless {@link #holdStart} made
 * the next {@code generateContent} block its caller (as a hung AICore binding would); that one
 * then never ends by itself, only when cancelled.
 */
public final class FakeMlKit extends GenerativeModelFutures {
    /** A Context for MlKitBackend's constructor (the stubs' Context is only a type). */
    public static final Context CONTEXT = new Context() {};

    /** A GenAiException with a code, as ML Kit raises them (the stub has no such constructor). */
    public static final class Failure extends GenAiException {
        private static final long serialVersionUID = 1L;
        private final int code;
        private final String message;

        public Failure(int code, String message) {
            this.code = code;
            this.message = message;
        }

        @Override public int getErrorCode() { return code; }
        @Override public java.time.Duration getRetryDelay() { return null; }
        @Override public String getMessage() { return message; }
    }

    /** A future the fake completes; counts the listeners that have run to their end. */
    final class Pending<V> implements ListenableFuture<V> {
        final CompletableFuture<V> future = new CompletableFuture<>();

        @Override public void addListener(Runnable listener, Executor executor) {
            future.whenComplete((v, t) -> executor.execute(() -> {
                try {
                    listener.run();
                } finally {
                    listenersRun.incrementAndGet();
                }
            }));
        }
        @Override public boolean cancel(boolean interrupt) { return future.cancel(interrupt); }
        @Override public boolean isCancelled() { return future.isCancelled(); }
        @Override public boolean isDone() { return future.isDone(); }
        @Override public V get() throws InterruptedException, ExecutionException { return future.get(); }
        @Override public V get(long t, TimeUnit u)
                throws InterruptedException, ExecutionException, TimeoutException {
            return future.get(t, u);
        }
    }

    private final AtomicInteger listenersRun = new AtomicInteger();
    private final AtomicInteger downloads = new AtomicInteger();
    private final List<Pending<GenerateContentResponse>> generations = new CopyOnWriteArrayList<>();
    private volatile int status = FeatureStatus.AVAILABLE;
    private volatile DownloadCallback callback;
    private volatile Pending<Void> downloadFuture;
    private volatile String reply = "ok";
    private volatile CountDownLatch startGate = new CountDownLatch(0);
    private volatile long startMillis;
    private final AtomicInteger blockedStarts = new AtomicInteger();

    /** A new fake, made what {@code GenerativeModelFutures.from} returns. */
    public static FakeMlKit install() {
        FakeMlKit fake = new FakeMlKit();
        stub = fake;
        return fake;
    }

    // ---- download script (each call plays on the calling thread) -----------------------------

    /** What checkStatus reports ({@link FeatureStatus}); download() makes it DOWNLOADING. */
    public void setStatus(int featureStatus) { status = featureStatus; }
    public int downloadCount() { return downloads.get(); }
    public void started(long bytesToDownload) { callback.onDownloadStarted(bytesToDownload); }
    public void progress(long bytesDownloaded) { callback.onDownloadProgress(bytesDownloaded); }
    public void callbackCompletes() { callback.onDownloadCompleted(); }
    public void callbackFails(int code, String message) { callback.onDownloadFailed(new Failure(code, message)); }
    public void futureSucceeds() { downloadFuture.future.complete(null); }
    public void futureFails(int code, String message) { downloadFuture.future.completeExceptionally(new Failure(code, message)); }

    /**
     * The callback's end and the future's end released together on two threads (each fails with
     * {@code code} when its flag says so); returns once both calls returned.
     */
    public void race(boolean callbackFails, boolean futureFails, int code)
            throws InterruptedException {
        CyclicBarrier start = new CyclicBarrier(2);
        Thread viaCallback = new Thread(() -> {
            await(start);
            if (callbackFails) callbackFails(code, "callback failed");
            else callbackCompletes();
        }, "fake-mlkit-callback");
        Thread viaFuture = new Thread(() -> {
            await(start);
            if (futureFails) futureFails(code, "future failed");
            else futureSucceeds();
        }, "fake-mlkit-future");
        viaCallback.start();
        viaFuture.start();
        viaCallback.join();
        viaFuture.join();
    }

    /** Waits (bounded) until n future listeners of this fake have run to their end. */
    public boolean awaitListeners(int n, long millis) throws InterruptedException {
        long end = System.currentTimeMillis() + millis;
        while (listenersRun.get() < n) {
            if (System.currentTimeMillis() > end) return false;
            Thread.sleep(1);
        }
        return true;
    }

    public int listenersRun() { return listenersRun.get(); }

    // ---- generate script ---------------------------------------------------------------------

    public void setReply(String text) { reply = text; }
    /**
     * The next generateContent blocks its caller until {@link #releaseStart} or for {@code millis} (so a
     * test need not call into a JVM thread that is busy in the blocked call).
     */
    public void holdStart(long millis) {
        startGate = new CountDownLatch(1);
        startMillis = millis;
    }
    public void releaseStart() { startGate.countDown(); }
    /** generateContent calls blocked now or before. */
    public int blockedStarts() { return blockedStarts.get(); }
    public int cancelledGenerations() {
        int n = 0;
        for (Pending<GenerateContentResponse> p : generations) if (p.isCancelled()) n++;
        return n;
    }

    // ---- GenerativeModelFutures --------------------------------------------------------------

    @Override public ListenableFuture<Integer> checkStatus() { return done(status); }

    @Override public ListenableFuture<Void> download(DownloadCallback c) {
        downloads.incrementAndGet();
        status = FeatureStatus.DOWNLOADING;
        callback = c;
        Pending<Void> f = new Pending<>();
        downloadFuture = f;
        return f;
    }

    @Override public ListenableFuture<GenerateContentResponse> generateContent(GenerateContentRequest r) {
        return generateContent(r, t -> {});
    }

    @Override public ListenableFuture<GenerateContentResponse> generateContent(
            GenerateContentRequest r, StreamingCallback cb) {
        Pending<GenerateContentResponse> f = new Pending<>();
        generations.add(f);
        CountDownLatch gate = startGate;
        if (gate.getCount() > 0) {
            startGate = new CountDownLatch(0); // one held call per holdStart
            blockedStarts.incrementAndGet();
            try {
                gate.await(startMillis, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return f; // ends only when cancelled
        }
        cb.onNewText(reply);
        f.future.complete(new GenerateContentResponse());
        return f;
    }

    @Override public ListenableFuture<CountTokensResponse> countTokens(GenerateContentRequest r) {
        Pending<CountTokensResponse> f = new Pending<>();
        f.future.completeExceptionally(new UnsupportedOperationException("countTokens"));
        return f;
    }

    @Override public ListenableFuture<Integer> getTokenLimit() { return done(4000); }
    @Override public GenerativeModel getGenerativeModel() { return () -> {}; }

    private <V> Pending<V> done(V value) {
        Pending<V> f = new Pending<>();
        f.future.complete(value);
        return f;
    }

    private static void await(CyclicBarrier barrier) {
        try {
            barrier.await(5, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
