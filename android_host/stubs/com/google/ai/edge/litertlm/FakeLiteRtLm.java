package com.google.ai.edge.litertlm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Test-only (not in the real library): the knobs and records of the fake engine the stubs
 * implement, so LiteRtBackend's lifetimes can be driven on a desktop JVM. Like LiteRT-LM's
 * SessionBasic ("A session already exists. Only one session is supported at a time.",
 * runtime/core/session_basic.cc), the engine refuses a second live conversation; every message a
 * conversation prefills (system instruction, initial messages, each sent message) is recorded.
 */
public final class FakeLiteRtLm {
    private FakeLiteRtLm() {}

    static volatile Throwable initFailure;
    static volatile List<String> reply = Arrays.asList("Hello", " there");
    static volatile long chunkMillis = 5;
    static volatile long cancelLagMillis = 150;
    static volatile boolean hang;
    static volatile long createMillis;
    static volatile boolean creating;
    static volatile String failNext;
    static volatile String failNextCreate;
    static volatile EngineConfig engineConfig;
    static volatile ConversationConfig conversationConfig;
    static volatile boolean engineClosed;
    static final AtomicInteger closed = new AtomicInteger();
    static final AtomicInteger cancels = new AtomicInteger();
    static final AtomicInteger created = new AtomicInteger();
    static final AtomicInteger alive = new AtomicInteger();
    static final AtomicInteger prefilledMessages = new AtomicInteger();
    static final AtomicLong prefilledChars = new AtomicLong();
    static final Queue<List<String>> queued = new ConcurrentLinkedQueue<>();
    static final List<List<String>> transcripts = Collections.synchronizedList(new ArrayList<List<String>>());
    private static final List<String> VIOLATIONS = Collections.synchronizedList(new ArrayList<String>());

    public static void reset() {
        initFailure = null;
        reply = Arrays.asList("Hello", " there");
        chunkMillis = 5;
        cancelLagMillis = 150;
        hang = false;
        createMillis = 0;
        creating = false;
        failNext = null;
        failNextCreate = null;
        engineConfig = null;
        conversationConfig = null;
        engineClosed = false;
        closed.set(0);
        cancels.set(0);
        created.set(0);
        alive.set(0);
        prefilledMessages.set(0);
        prefilledChars.set(0);
        queued.clear();
        transcripts.clear();
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

    /** The next decode (of any conversation) streams these chunks instead of the default reply. */
    public static void enqueueReply(String[] chunks) { queued.add(Arrays.asList(chunks)); }

    /** The next decode streams its reply, then fails with this message (a native error). */
    public static void failNext(String message) { failNext = message; }
    /** The next createConversation throws IllegalStateException(message). */
    public static void failNextCreate(String message) { failNextCreate = message; }

    public static void setHang(boolean hang) { FakeLiteRtLm.hang = hang; }
    public static void setCancelLagMillis(long millis) { cancelLagMillis = millis; }
    /** Engine.createConversation takes this long (a slow native session set-up). */
    public static void setCreateMillis(long millis) { createMillis = millis; }

    /** Waits (bounded) until a createConversation is under way. */
    public static boolean awaitCreating(long millis) throws InterruptedException {
        long end = System.currentTimeMillis() + millis;
        while (!creating) {
            if (System.currentTimeMillis() > end) return false;
            Thread.sleep(1);
        }
        return true;
    }

    public static String[] violations() { synchronized (VIOLATIONS) { return VIOLATIONS.toArray(new String[0]); } }
    public static int closedConversations() { return closed.get(); }
    public static int cancels() { return cancels.get(); }
    public static boolean engineClosed() { return engineClosed; }
    public static int createdConversations() { return created.get(); }
    public static int aliveConversations() { return alive.get(); }
    /** Messages prefilled in all: system instructions, initial messages, sent messages. */
    public static int prefilledMessages() { return prefilledMessages.get(); }
    public static long prefilledChars() { return prefilledChars.get(); }
    /** Conversation {@code n}'s history as "role: text" (0 is the first created). */
    public static String[] transcript(int n) {
        List<String> t = transcripts.get(n);
        synchronized (t) { return t.toArray(new String[0]); }
    }
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

    /** A new conversation's history; the system instruction and initial messages are prefilled. */
    static List<String> open(ConversationConfig config) {
        List<String> t = Collections.synchronizedList(new ArrayList<String>());
        Contents system = config.getSystemInstruction();
        if (system != null) prefill(t, "system", system.toString());
        for (Message m : config.getInitialMessages()) prefill(t, m.role(), m.toString());
        transcripts.add(t);
        return t;
    }

    static void prefill(List<String> transcript, String role, String text) {
        transcript.add(role + ": " + text);
        prefilledMessages.incrementAndGet();
        prefilledChars.addAndGet(text.length());
    }

    static List<String> nextReply() {
        List<String> next = queued.poll();
        return next != null ? next : reply;
    }
}
