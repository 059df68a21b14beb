package com.google.mlkit.genai.prompt;
public final class Generation {
    public static final Generation INSTANCE = new Generation();
    private Generation() {}
    /** As outside the main process: no client until ML Kit was initialised with a Context. */
    public GenerativeModel getClient() {
        if (com.google.mlkit.common.MlKit.stubContext == null) {
            throw new IllegalStateException("MlKitContext has not been initialized");
        }
        return () -> {};
    }
}
