package com.google.mlkit.genai.prompt;
public class CountTokensResponse {
    public int getTotalTokens() { throw new UnsupportedOperationException("stub"); }
}
