package org.oamd.host;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A scripted {@link OamdBackend} for desktop tests. Each generate() runs on a new thread of its
 * own and plays the next scripted step (a reply in chunks, an error by numeric code, a call that
 * hangs until cancelled, or one that never ends at all); with no step queued it replies with the
 * default reply. A per-request guard makes the terminal callback happen exactly once.
 */
public final class FakeBackend implements OamdBackend {
    private enum Kind { REPLY, ERROR, HANG, SILENT, NULL_USAGE, LATE_CALL }

    private static final class Step {
        final Kind kind;
        final String[] chunks;
        final long delayMillis;
        final int code;
        final String message;
        final long retryAfterMillis;
        final String finishReason;

        Step(Kind kind, String[] chunks, long delayMillis, int code, String message,
             long retryAfterMillis, String finishReason) {
            this.kind = kind;
            this.chunks = chunks == null ? new String[0] : chunks;
            this.delayMillis = delayMillis;
            this.code = code;
            this.message = message;
            this.retryAfterMillis = retryAfterMillis;
            this.finishReason = finishReason;
        }
    }

    private final class Run {
        final long id;
        final GenerationSink sink;
        final CountDownLatch cancelled = new CountDownLatch(1);
        final AtomicBoolean ended = new AtomicBoolean(false);
        Thread thread;

        Run(long id, GenerationSink sink) {
            this.id = id;
            this.sink = sink;
        }

        boolean isCancelled() {
            return cancelled.getCount() == 0;
        }

        /** Waits up to millis; true when cancelled meanwhile. */
        boolean pause(long millis) throws InterruptedException {
            if (millis <= 0) return isCancelled();
            return cancelled.await(millis, TimeUnit.MILLISECONDS);
        }

        void done(String usage, String reason) {
            if (ended.compareAndSet(false, true)) {
                terminals.incrementAndGet();
                runs.remove(id);
                sink.onDone(usage, reason);
            }
        }

        void error(int code, String message, long retryAfter) {
            if (ended.compareAndSet(false, true)) {
                terminals.incrementAndGet();
                runs.remove(id);
                sink.onError(code, message, retryAfter);
            }
        }
    }

    private final ConcurrentLinkedQueue<Step> script = new ConcurrentLinkedQueue<>();
    private final Map<Long, Run> runs = new ConcurrentHashMap<>();
    private final List<Thread> threads = new ArrayList<>();
    private final List<String> prompts = new ArrayList<>();
    private final List<String> options = new ArrayList<>();
    private final AtomicLong nextId = new AtomicLong(1);
    private final AtomicInteger cancels = new AtomicInteger();
    private final AtomicInteger terminals = new AtomicInteger();
    private final CountDownLatch closed = new CountDownLatch(1);
    private volatile String status = "{\"status\":\"available\",\"contextSize\":4000,\"maxOutputTokens\":256}";
    private volatile String defaultReply = "ok";
    private volatile int tokenLimit = 4000;
    private volatile long statusDelayMillis = 0;
    private final AtomicInteger downloads = new AtomicInteger();
    private volatile CountDownLatch downloadGate = new CountDownLatch(0);
    private volatile String downloadFailure = null;

    // ---- scripting ---------------------------------------------------------------------------

    public void enqueueReply(String[] chunks, long delayMillis) {
        script.add(new Step(Kind.REPLY, chunks, delayMillis, 0, null, 0, "STOP"));
    }

    public void enqueueReplyWithReason(String[] chunks, long delayMillis, String finishReason) {
        script.add(new Step(Kind.REPLY, chunks, delayMillis, 0, null, 0, finishReason));
    }

    /** Streams chunksBefore, then fails with code. */
    public void enqueueError(int code, String message, long retryAfterMillis, String[] chunksBefore) {
        script.add(new Step(Kind.ERROR, chunksBefore, 0, code, message, retryAfterMillis, null));
    }

    /** Streams chunksBefore, then waits until cancelled (ends with CANCELLED). */
    public void enqueueHang(String[] chunksBefore) {
        script.add(new Step(Kind.HANG, chunksBefore, 0, 0, null, 0, null));
    }

    /**
     * Streams chunksBefore, then calls no terminal method, even when cancelled, until the
     * backend is closed (then CANCELLED, so a test can end it).
     */
    public void enqueueSilent(String[] chunksBefore) {
        script.add(new Step(Kind.SILENT, chunksBefore, 0, 0, null, 0, null));
    }

    /** Streams chunks, then ends with onDone(null, null), as ML Kit and LiteRT-LM backends may. */
    public void enqueueNullUsage(String[] chunks) {
        script.add(new Step(Kind.NULL_USAGE, chunks, 0, 0, null, 0, null));
    }

    /**
     * Streams chunks, ends normally, then calls onChunk("late") on the sink once more after
     * delayMillis, as a library whose callback thread races its completion would.
     */
    public void enqueueLateCall(String[] chunks, long delayMillis) {
        script.add(new Step(Kind.LATE_CALL, chunks, delayMillis, 0, null, 0, "STOP"));
    }

    public void setStatus(String json) { status = json; }
    public void setDefaultReply(String reply) { defaultReply = reply; }
    public void setTokenLimit(int limit) { tokenLimit = limit; }
    /** Downloads stop after 100 of 300 bytes until {@link #releaseDownload}. */
    public void holdDownload() { downloadGate = new CountDownLatch(1); }
    public void releaseDownload() { downloadGate.countDown(); }
    /** Downloads fail with NOT_ENOUGH_DISK_SPACE and this message after 100 bytes (null: succeed). */
    public void failDownload(String message) { downloadFailure = message; }
    public int downloadCount() { return downloads.get(); }

    /** status() blocks this long first, as a hung AICore binding would. */
    public void setStatusDelay(long millis) { statusDelayMillis = millis; }

    // ---- inspection --------------------------------------------------------------------------

    public synchronized String[] prompts() { return prompts.toArray(new String[0]); }
    public synchronized String[] options() { return options.toArray(new String[0]); }
    public int cancelCount() { return cancels.get(); }
    public int terminalCount() { return terminals.get(); }
    public int running() { return runs.size(); }

    /** Joins every generation thread that has ended or ends within millis; true when all did. */
    public boolean awaitIdle(long millis) throws InterruptedException {
        long deadline = System.currentTimeMillis() + millis;
        List<Thread> snapshot;
        synchronized (this) { snapshot = new ArrayList<>(threads); }
        for (Thread t : snapshot) {
            long left = deadline - System.currentTimeMillis();
            if (left <= 0) return false;
            t.join(left);
            if (t.isAlive()) return false;
        }
        return true;
    }

    // ---- OamdBackend -------------------------------------------------------------------------

    @Override
    public String status() {
        if (statusDelayMillis > 0) {
            try {
                Thread.sleep(statusDelayMillis);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        return status;
    }

    @Override
    public void download(DownloadListener listener) {
        downloads.incrementAndGet();
        status = "{\"status\":\"downloading\"}";
        Thread t = new Thread(() -> {
            listener.onProgress(0, 300);
            listener.onProgress(100, 300);
            String failure = downloadFailure;
            if (failure != null) {
                status = "{\"status\":\"downloadable\"}";
                listener.onError(ErrorCodes.NOT_ENOUGH_DISK_SPACE, failure);
                return;
            }
            try {
                downloadGate.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            for (long done = 200; done <= 300; done += 100) listener.onProgress(done, 300);
            status = "{\"status\":\"available\",\"contextSize\":" + tokenLimit + "}";
            listener.onCompleted();
        }, "fake-download");
        t.setDaemon(true);
        t.start();
    }

    @Override
    public long generate(String prompt, String optionsJson, GenerationSink sink) {
        long id = nextId.getAndIncrement();
        Step step = script.poll();
        if (step == null) step = new Step(Kind.REPLY, new String[] {defaultReply}, 0, 0, null, 0, "STOP");
        Run run = new Run(id, sink);
        runs.put(id, run);
        final Step s = step;
        Thread t = new Thread(() -> play(run, s, prompt), "fake-backend-" + id);
        t.setDaemon(true);
        run.thread = t;
        synchronized (this) {
            prompts.add(prompt);
            options.add(optionsJson);
            threads.add(t);
        }
        t.start();
        return id;
    }

    private void play(Run run, Step step, String prompt) {
        try {
            int output = 0;
            for (String chunk : step.chunks) {
                if (run.pause(step.delayMillis)) {
                    run.error(ErrorCodes.CANCELLED, "cancelled", 0);
                    return;
                }
                run.sink.onChunk(chunk);
                output += (chunk.length() + 3) / 4;
            }
            switch (step.kind) {
                case REPLY:
                    if (run.isCancelled()) {
                        run.error(ErrorCodes.CANCELLED, "cancelled", 0);
                    } else {
                        run.done("{\"inputTokens\":" + countTokens(prompt) + ",\"outputTokens\":"
                                + output + "}", step.finishReason);
                    }
                    return;
                case ERROR:
                    run.error(step.code, step.message, step.retryAfterMillis);
                    return;
                case NULL_USAGE:
                    run.done(null, null);
                    return;
                case LATE_CALL:
                    run.done("{\"outputTokens\":" + output + "}", step.finishReason);
                    Thread.sleep(step.delayMillis);
                    run.sink.onChunk("late"); // deliberately after the terminal call
                    return;
                case HANG:
                    run.cancelled.await();
                    run.error(ErrorCodes.CANCELLED, "cancelled", 0);
                    return;
                case SILENT:
                    closed.await();
                    run.error(ErrorCodes.CANCELLED, "backend closed", 0);
                    return;
                default:
                    throw new IllegalStateException();
            }
        } catch (InterruptedException e) {
            run.error(ErrorCodes.CANCELLED, "interrupted", 0);
        } catch (RuntimeException e) {
            run.error(ErrorCodes.UNKNOWN, String.valueOf(e), 0);
        }
    }

    @Override
    public void cancel(long requestId) {
        Run run = runs.get(requestId);
        if (run != null) {
            cancels.incrementAndGet();
            run.cancelled.countDown();
        }
    }

    @Override public int countTokens(String text) { return (text.length() + 3) / 4; }
    @Override public int tokenLimit() { return tokenLimit; }

    @Override
    public void close() {
        for (Run run : runs.values()) run.cancelled.countDown();
        closed.countDown();
    }
}
