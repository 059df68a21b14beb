package com.google.mlkit.genai.prompt;
public class Candidate {
    public String getText() { throw new UnsupportedOperationException("stub"); }
    /** Stub: STOP (a test's candidate). */
    public int getFinishReason() { return FinishReason.STOP; }
    public static final class FinishReason {
        private FinishReason() {}
        public static final int STOP = 0;
        public static final int MAX_TOKENS = 1;
        public static final int OTHER = 2;
    }
}
