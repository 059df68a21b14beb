package com.google.ai.edge.litertlm;
// The fake's streamed chunk: toString() is the chunk's text (an assumption about the real class,
// whose source is not in the stored index; see android_host/README.md's device checklist).
public final class Message {
    private final String text;
    Message(String text) { this.text = text; }
    @Override public String toString() { return text; }
}
