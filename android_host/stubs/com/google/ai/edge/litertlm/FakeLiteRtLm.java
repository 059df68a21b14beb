package com.google.ai.edge.litertlm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Test-only (not in the real library): the knobs and records of the fake engine the stubs
 * implement, so LiteRtBackend's lifetimes can be driven on a desktop JVM.
 */
public final class FakeLiteRtLm {
    private FakeLiteRtLm() {}

    static volatile Throwable initFailure;
    static volatile List<String> reply = Arrays.asList("Hello", " there");
    static volatile long chunkMillis = 5;
    static volatile long cancelLagMillis = 150;
    static volatile boolean hang;
    static volatile EngineConfig engineConfig;
    static volatile ConversationConfig conversationConfig;
    static volatile boolean engineClosed;
    static final AtomicInteger closed = new AtomicInteger();
    static final AtomicInteger cancels = new AtomicInteger();
    private static final List<String> VIOLATIONS = Collections.synchronizedList(new ArrayList<String>());

    public static void reset() {
        initFailure = null;
        reply = Arrays.asList("Hello", " there");
        chunkMillis = 5;
        cancelLagMillis = 150;
        hang = false;
        engineConfig = null;
        conversationConfig = null;
        engineClosed = false;
        closed.set(0);
        cancels.set(0);
        VIOLATIONS.clear();
    }

    /** The next Engine.initialize() throws this ("unsatisfied-link", "runtime" or "error"). */
    public static void failInitialize(String kind) {
        if ("unsatisfied-link".equals(kind)) initFailure = new UnsatisfiedLinkError("dlopen failed: liblitertlm_jni.so not found");
        else if ("error".equals(kind)) initFailure = new OutOfMemoryError("model too large");
        else initFailure = new IllegalStateException("bad model file");
    }

    public static void setReply(String[] chunks, long chunkMillis) {
        reply = Arrays.asList(chunks);
        FakeLiteRtLm.chunkMillis = chunkMillis;
    }

    public static void setHang(boolean hang) { FakeLiteRtLm.hang = hang; }
    public static void setCancelLagMillis(long millis) { cancelLagMillis = millis; }

    public static String[] violations() { synchronized (VIOLATIONS) { return VIOLATIONS.toArray(new String[0]); } }
    public static int closedConversations() { return closed.get(); }
    public static int cancels() { return cancels.get(); }
    public static boolean engineClosed() { return engineClosed; }
    public static String cacheDir() { return engineConfig == null ? null : engineConfig.getCacheDir(); }
    public static int maxNumTokens() {
        Integer n = engineConfig == null ? null : engineConfig.getMaxNumTokens();
        return n == null ? -1 : n;
    }
    /** The last conversation's maxOutputToken, or -1 when it had none. */
    public static int maxOutputToken() {
        Integer n = conversationConfig == null ? null : conversationConfig.getMaxOutputToken();
        return n == null ? -1 : n;
    }
    public static String systemInstruction() {
        Contents c = conversationConfig == null ? null : conversationConfig.getSystemInstruction();
        return c == null ? null : c.toString();
    }

    /** Waits (bounded) until {@code n} conversations were closed in all. */
    public static boolean awaitClosed(int n, long millis) throws InterruptedException {
        long end = System.currentTimeMillis() + millis;
        while (closed.get() < n) {
            if (System.currentTimeMillis() > end) return false;
            Thread.sleep(2);
        }
        return true;
    }

    static void throwInitFailure() {
        Throwable t = initFailure;
        if (t instanceof Error) throw (Error) t;
        if (t instanceof RuntimeException) throw (RuntimeException) t;
    }

    static void violation(String what) { VIOLATIONS.add(what); }
}
