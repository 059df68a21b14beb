package com.google.ai.edge.litertlm;

import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.atomic.AtomicBoolean;

// Conversation.kt's surface (sendMessageAsync's @JvmOverloads prefix (String, MessageCallback),
// cancelProcess, getTokenCount, close; close and cancelProcess throw IllegalStateException once
// closed, as the real ones do). The behaviour is a fake: the reply is decoded on its own thread,
// which calls back; a cancelled decode keeps running FakeLiteRtLm.cancelLagMillis before its
// onError(CancellationException), as a native decode finishing its current step would; close()
// records a violation when it runs inside a callback or while a decode is still running, and so
// does a message sent while a decode is running. The history (what was prefilled, what the model
// said, a cancelled reply's part included) is recorded in FakeLiteRtLm.
public final class Conversation implements AutoCloseable {
    private final AtomicBoolean alive = new AtomicBoolean(true);
    private volatile boolean cancelled;
    private volatile boolean decoding;
    private volatile Thread decoder;
    private volatile boolean inCallback;
    private final List<String> transcript;

    Conversation(ConversationConfig config) {
        transcript = FakeLiteRtLm.open(config);
        FakeLiteRtLm.created.incrementAndGet();
        FakeLiteRtLm.alive.incrementAndGet();
    }

    public boolean isAlive() { return alive.get(); }

    public void sendMessageAsync(String text, MessageCallback callback) {
        checkIsAlive();
        if (text.isEmpty()) throw new IllegalStateException("content is empty");
        if (decoding) FakeLiteRtLm.violation("sendMessageAsync while a decode is running");
        cancelled = false; // as SessionBasic: a new turn clears the last cancel
        FakeLiteRtLm.prefill(transcript, "user", text);
        final List<String> reply = FakeLiteRtLm.nextReply();
        final boolean hang = FakeLiteRtLm.hang;
        final String fail = FakeLiteRtLm.failNext;
        FakeLiteRtLm.failNext = null;
        decoding = true;
        Thread t = new Thread(() -> {
            StringBuilder said = new StringBuilder();
            try {
                if (hang) {
                    // LiteRT-LM#3266: no callback at all until cancelled
                    while (!cancelled) sleep(5);
                } else {
                    for (String chunk : reply) {
                        sleep(FakeLiteRtLm.chunkMillis);
                        if (cancelled) break;
                        said.append(chunk);
                        call(() -> callback.onMessage(new Message(chunk)));
                    }
                }
                transcript.add("model: " + said);
                if (cancelled) {
                    sleep(FakeLiteRtLm.cancelLagMillis);
                    decoding = false;
                    call(() -> callback.onError(new CancellationException("cancelled")));
                } else if (fail != null) {
                    decoding = false;
                    call(() -> callback.onError(new IllegalStateException(fail)));
                } else {
                    decoding = false;
                    call(callback::onDone);
                }
            } finally {
                decoding = false;
            }
        }, "fake-litertlm-decode");
        decoder = t;
        t.setDaemon(true);
        t.start();
    }

    private void call(Runnable r) {
        inCallback = true;
        try {
            r.run();
        } finally {
            inCallback = false;
        }
    }

    public void cancelProcess() {
        checkIsAlive();
        cancelled = true;
        FakeLiteRtLm.cancels.incrementAndGet();
    }

    public int getTokenCount() {
        checkIsAlive();
        return 0;
    }

    @Override public void close() {
        if (!alive.compareAndSet(true, false)) {
            throw new IllegalStateException("Conversation is closed already.");
        }
        if (Thread.currentThread() == decoder) FakeLiteRtLm.violation("close() inside its own callback");
        else if (inCallback) FakeLiteRtLm.violation("close() while its callback is running");
        if (decoding) FakeLiteRtLm.violation("close() while a decode is running");
        FakeLiteRtLm.alive.decrementAndGet();
        FakeLiteRtLm.closed.incrementAndGet();
    }

    private void checkIsAlive() {
        if (!alive.get()) throw new IllegalStateException("Conversation is not alive.");
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
