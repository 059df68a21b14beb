package com.google.mlkit.genai.prompt;
public class SystemInstruction {
    /** Stub only: when true, a request with a system instruction is refused at build(). */
    public static volatile boolean stubRefused;
    public final String stubText;
    public SystemInstruction(String text) { this.stubText = text; }
}
