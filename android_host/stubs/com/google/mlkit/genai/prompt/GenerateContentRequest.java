package com.google.mlkit.genai.prompt;
public class GenerateContentRequest {
    public static class Builder {
        public Builder(TextPart text) {}
        public Builder(SystemInstruction system, TextPart text) {}
        public Builder setTemperature(Float t) { return this; }
        public Builder setTopK(Integer k) { return this; }
        public Builder setSeed(Integer s) { return this; }
        public Builder setMaxOutputTokens(Integer n) { return this; }
        public Builder setCandidateCount(Integer n) { return this; }
        public GenerateContentRequest build() { throw new UnsupportedOperationException("stub"); }
    }
}
