package com.google.mlkit.genai.common;
public interface StreamingCallback {
    void onNewText(String text);
}
