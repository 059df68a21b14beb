package com.google.mlkit.genai.prompt;
public class GenerateContentRequest {
    /** Stub only: what the request was built from (stubSystem null when none). */
    public final String stubSystem;
    public final String stubText;
    GenerateContentRequest(String system, String text) { this.stubSystem = system; this.stubText = text; }
    public static class Builder {
        private final SystemInstruction system;
        private final TextPart text;
        public Builder(TextPart text) { this(null, text); }
        public Builder(SystemInstruction system, TextPart text) { this.system = system; this.text = text; }
        public Builder setTemperature(Float t) { return this; }
        public Builder setTopK(Integer k) { return this; }
        public Builder setSeed(Integer s) { return this; }
        public Builder setMaxOutputTokens(Integer n) { return this; }
        public Builder setCandidateCount(Integer n) { return this; }
        public GenerateContentRequest build() {
            if (system != null && SystemInstruction.stubRefused) {
                throw new IllegalArgumentException("SystemInstruction is not supported by this model");
            }
            return new GenerateContentRequest(system == null ? null : system.stubText, text.stubText);
        }
    }
}
