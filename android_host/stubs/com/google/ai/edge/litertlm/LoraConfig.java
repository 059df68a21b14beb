package com.google.ai.edge.litertlm;
public final class LoraConfig {
    public LoraConfig(String loraPath, String audioLoraPath) {}
}
