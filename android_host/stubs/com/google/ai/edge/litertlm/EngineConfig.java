package com.google.ai.edge.litertlm;
// Config.kt: a data class with @JvmOverloads (one constructor per prefix; the 8th parameter,
// activationDataType, is not used by oamd).
public final class EngineConfig {
    private final String modelPath;
    private final Integer maxNumTokens;
    private final String cacheDir;
    public EngineConfig(String modelPath) { this(modelPath, new Backend.CPU(), null, null, null, null, null); }
    public EngineConfig(String modelPath, Backend backend, Backend visionBackend, Backend audioBackend, Integer maxNumTokens, Integer maxNumImages, String cacheDir) {
        if (maxNumTokens != null && maxNumTokens <= 0) {
            throw new IllegalArgumentException("maxNumToken must be positive or null (use the default from model or engine).");
        }
        this.modelPath = modelPath;
        this.maxNumTokens = maxNumTokens;
        this.cacheDir = cacheDir;
    }
    public String getModelPath() { return modelPath; }
    public Integer getMaxNumTokens() { return maxNumTokens; }
    public String getCacheDir() { return cacheDir; }
}
