package com.google.ai.edge.litertlm;
// The fake's message: a role and its text. toString() is the text (an assumption about the real
// class, whose source is not in the stored index; see android_host/README.md's device checklist).
// The real Kotlin class builds history messages with Message.user(...) / Message.model(...)
// (companion functions; from Java Message.Companion.user / .model unless they are @JvmStatic).
public final class Message {
    public static final Companion Companion = new Companion();
    private final String role;
    private final String text;
    Message(String text) { this("model", text); }
    Message(String role, String text) {
        this.role = role;
        this.text = text;
    }
    String role() { return role; }
    @Override public String toString() { return text; }
    public static final class Companion {
        private Companion() {}
        public Message user(String text) { return new Message("user", text); }
        public Message model(String text) { return new Message("model", text); }
    }
}
