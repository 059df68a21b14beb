package com.google.ai.edge.litertlm;
// Config.kt: `sealed class Backend(val name: String)`; CPU is a data class whose two parameters
// both have defaults and no @JvmOverloads, so Java sees CPU() and CPU(Integer, Integer) only.
public abstract class Backend {
    private final String name;
    Backend(String name) { this.name = name; }
    public final String getName() { return name; }
    public static final class CPU extends Backend {
        public CPU() { super("CPU"); }
        public CPU(Integer threadCount, Integer numOfThreads) { super("CPU"); }
    }
    public static final class GPU extends Backend {
        public GPU() { super("GPU"); }
    }
}
