package com.google.ai.edge.litertlm;
public final class Engine implements AutoCloseable {
    public Engine(EngineConfig config) {}
    public void initialize() {}
    public Conversation createConversation(ConversationConfig config) { throw new UnsupportedOperationException("stub"); }
    @Override public void close() {}
}
