package com.google.ai.edge.litertlm;
import java.util.List;
public final class ConversationConfig {
    public ConversationConfig(Contents systemInstruction, List<Message> initialMessages, List<Object> tools, SamplerConfig samplerConfig, boolean automaticToolCalling) {}
}
