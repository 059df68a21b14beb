package com.google.ai.edge.litertlm;
public final class SamplerConfig {
    public SamplerConfig(int topK, double topP, double temperature, int seed) {}
}
