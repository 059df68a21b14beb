package com.google.ai.edge.litertlm;
public final class Channel {
    public Channel(String channelName, String start, String end) {}
}
