package com.google.mlkit.common;
import android.content.Context;
/** Stub of ML Kit's manual initialisation; strict like the internal MlKitContext it wraps. */
public class MlKit {
    /** Stub only: the context ML Kit was initialised with (null: not initialised). */
    public static volatile Context stubContext;
    public static void initialize(Context context) {
        if (context == null) throw new NullPointerException("context");
        synchronized (MlKit.class) {
            if (stubContext != null) throw new IllegalStateException("MlKitContext is already initialized");
            stubContext = context;
        }
    }
}
