package com.google.mlkit.genai.prompt;
public class TextPart {
    public TextPart(String text) {}
}
