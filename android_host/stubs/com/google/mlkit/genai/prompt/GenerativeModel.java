package com.google.mlkit.genai.prompt;
public interface GenerativeModel extends java.io.Closeable {
    @Override void close();
}
