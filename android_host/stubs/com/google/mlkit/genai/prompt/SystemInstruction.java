package com.google.mlkit.genai.prompt;
public class SystemInstruction {
    public SystemInstruction(String text) {}
}
