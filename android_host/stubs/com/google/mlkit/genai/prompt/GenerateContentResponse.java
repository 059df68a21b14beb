package com.google.mlkit.genai.prompt;
public class GenerateContentResponse {
    /** Stub: one candidate that stopped normally. */
    public java.util.List<Candidate> getCandidates() { return java.util.Collections.singletonList(new Candidate()); }
}
