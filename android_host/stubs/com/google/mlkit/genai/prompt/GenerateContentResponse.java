package com.google.mlkit.genai.prompt;
public class GenerateContentResponse {
    public java.util.List<Candidate> getCandidates() { throw new UnsupportedOperationException("stub"); }
}
