package com.google.ai.edge.litertlm;
public final class Contents {
    public static final Companion Companion = new Companion();
    public static final class Companion {
        private Companion() {}
        public Contents of(String text) { throw new UnsupportedOperationException("stub"); }
    }
}
