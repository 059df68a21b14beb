package com.google.mlkit.genai.prompt;
public final class Generation {
    public static final Generation INSTANCE = new Generation();
    private Generation() {}
    public GenerativeModel getClient() { throw new UnsupportedOperationException("stub"); }
}
