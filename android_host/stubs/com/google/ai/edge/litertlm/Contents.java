package com.google.ai.edge.litertlm;
public final class Contents {
    public static final Companion Companion = new Companion();
    private final String text;
    private Contents(String text) { this.text = text; }
    @Override public String toString() { return text; }
    public static final class Companion {
        private Companion() {}
        public Contents of(String text) { return new Contents(text); }
    }
}
