package com.google.ai.edge.litertlm;
public final class Conversation implements AutoCloseable {
    public Message sendMessage(String text) { throw new UnsupportedOperationException("stub"); }
    public void sendMessageAsync(String text, MessageCallback callback) {}
    public void cancelProcess() {}
    @Override public void close() {}
}
