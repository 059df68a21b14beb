package com.google.mlkit.genai.common;
public class GenAiException extends Exception {
    private static final long serialVersionUID = 1L;
    public int getErrorCode() { throw new UnsupportedOperationException("stub"); }
    public java.time.Duration getRetryDelay() { throw new UnsupportedOperationException("stub"); }
}
