package com.google.mlkit.genai.prompt;
public class TextPart {
    public final String stubText;
    public TextPart(String text) { this.stubText = text; }
}
