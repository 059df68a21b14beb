package com.google.ai.edge.litertlm;
// Engine.kt's surface; the behaviour is the fake's (FakeLiteRtLm): initialize() throws what the
// test asked for, the configs are recorded; createConversation takes FakeLiteRtLm.createMillis;
// close() records a violation while a conversation is alive (closed under it).
public final class Engine implements AutoCloseable {
    private final EngineConfig config;
    private volatile boolean initialized;
    public Engine(EngineConfig config) { this.config = config; }
    public boolean isInitialized() { return initialized; }
    public void initialize() {
        if (initialized) throw new IllegalStateException("Engine is already initialized.");
        FakeLiteRtLm.engineConfig = config;
        FakeLiteRtLm.throwInitFailure();
        initialized = true;
    }
    public Conversation createConversation(ConversationConfig config) {
        if (!initialized) throw new IllegalStateException("Engine is not initialized.");
        String fail = FakeLiteRtLm.failNextCreate;
        if (fail != null) {
            FakeLiteRtLm.failNextCreate = null;
            throw new IllegalStateException(fail);
        }
        if (FakeLiteRtLm.alive.get() > 0) {
            FakeLiteRtLm.violation("a second conversation while one is alive");
            throw new IllegalStateException("FAILED_PRECONDITION: A session already exists. Only one session is supported at a time.");
        }
        FakeLiteRtLm.creating = true;
        try {
            if (FakeLiteRtLm.createMillis > 0) Thread.sleep(FakeLiteRtLm.createMillis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            FakeLiteRtLm.creating = false;
        }
        FakeLiteRtLm.conversationConfig = config;
        return new Conversation(config);
    }
    @Override public void close() {
        if (!initialized) throw new IllegalStateException("Engine is not initialized.");
        initialized = false;
        if (FakeLiteRtLm.alive.get() > 0) FakeLiteRtLm.violation("engine closed under a live conversation");
        FakeLiteRtLm.engineClosed = true;
    }
}
