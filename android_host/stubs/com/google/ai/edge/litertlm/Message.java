package com.google.ai.edge.litertlm;
public final class Message {
    @Override public String toString() { throw new UnsupportedOperationException("stub"); }
}
