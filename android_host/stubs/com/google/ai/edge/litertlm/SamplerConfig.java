package com.google.ai.edge.litertlm;
// Config.kt: a data class without @JvmOverloads (seed's default is invisible to Java), with the
// same argument checks.
public final class SamplerConfig {
    public SamplerConfig(int topK, double topP, double temperature, int seed) {
        if (topK <= 0) throw new IllegalArgumentException("topK should be positive, but got " + topK + ".");
        if (topP < 0 || topP > 1) throw new IllegalArgumentException("topP should between 0 and 1 inclusively, but got " + topP + ".");
        if (temperature < 0) throw new IllegalArgumentException("temperature should be non-negative, but got " + temperature + ".");
    }
}
