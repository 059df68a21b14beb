package com.google.ai.edge.litertlm;
public abstract class Backend {
    public static final class CPU extends Backend {
        public CPU() {}
        public CPU(Integer threadCount) {}
    }
    public static final class GPU extends Backend {
        public GPU() {}
    }
}
