package com.google.ai.edge.litertlm;
import java.util.List;
import java.util.Map;
// Config.kt: a data class with @JvmOverloads, so Java sees one constructor per prefix of
// (systemInstruction, initialMessages, tools, samplerConfig, automaticToolCalling, channels,
// extraContext, loraConfig, prefillPrefaceOnInit, maxOutputToken, ...). Only the prefixes oamd
// uses are stubbed. The getters feed the fake (FakeLiteRtLm).
public final class ConversationConfig {
    private final Contents systemInstruction;
    private final SamplerConfig samplerConfig;
    private final boolean automaticToolCalling;
    private final Integer maxOutputToken;
    private final List<Message> initialMessages;
    public ConversationConfig(Contents systemInstruction, List<Message> initialMessages, List<ToolProvider> tools, SamplerConfig samplerConfig, boolean automaticToolCalling) {
        this(systemInstruction, initialMessages, tools, samplerConfig, automaticToolCalling, null, java.util.Collections.<String, Object>emptyMap(), null, false, null);
    }
    public ConversationConfig(Contents systemInstruction, List<Message> initialMessages, List<ToolProvider> tools, SamplerConfig samplerConfig, boolean automaticToolCalling, List<Channel> channels, Map<String, Object> extraContext, LoraConfig loraConfig, boolean prefillPrefaceOnInit, Integer maxOutputToken) {
        if (maxOutputToken != null && maxOutputToken <= 0) {
            throw new IllegalArgumentException("maxOutputToken must be positive or null (use the default from model or engine).");
        }
        this.systemInstruction = systemInstruction;
        this.initialMessages = new java.util.ArrayList<>(initialMessages);
        this.samplerConfig = samplerConfig;
        this.automaticToolCalling = automaticToolCalling;
        this.maxOutputToken = maxOutputToken;
    }
    public Contents getSystemInstruction() { return systemInstruction; }
    public SamplerConfig getSamplerConfig() { return samplerConfig; }
    public boolean getAutomaticToolCalling() { return automaticToolCalling; }
    public Integer getMaxOutputToken() { return maxOutputToken; }
    public List<Message> getInitialMessages() { return initialMessages; }
}
