package com.google.ai.edge.litertlm;
public final class EngineConfig {
    public EngineConfig(String modelPath) {}
    public EngineConfig(String modelPath, Backend backend, Backend visionBackend, Backend audioBackend, Integer maxNumTokens, Integer maxNumImages, String cacheDir) {}
}
