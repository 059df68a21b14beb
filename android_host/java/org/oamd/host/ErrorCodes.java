package org.oamd.host;

/**
 * Numeric error codes a backend reports through {@link GenerationSink#onError}. They are ML Kit's
 * {@code GenAiException.ErrorCode} values, so {@code MlKitBackend} passes them through unchanged;
 * other backends (LiteRT-LM, the fake) map their failures onto the same table.
 */
public final class ErrorCodes {
    private ErrorCodes() {}

    public static final int UNKNOWN = 0;
    public static final int REQUEST_PROCESSING_ERROR = 4;
    public static final int CANCELLED = 7;
    public static final int NOT_AVAILABLE = 8;
    public static final int BUSY = 9;
    public static final int RESPONSE_PROCESSING_ERROR = 11;
    public static final int REQUEST_TOO_LARGE = 12;
    public static final int RESPONSE_GENERATION_ERROR = 15;
    public static final int NOT_SUPPORTED = 16;
    public static final int PER_APP_BATTERY_USE_QUOTA_EXCEEDED = 27;
    public static final int PER_DEVICE_BATTERY_USE_QUOTA_EXCEEDED = 28;
    /** AICore: the app is not the top foreground app; oamd reports model_unavailable, reason background. */
    public static final int BACKGROUND_USE_BLOCKED = 30;
    public static final int NOT_ENOUGH_DISK_SPACE = 501;
    public static final int NEEDS_SYSTEM_UPDATE = 604;
    public static final int REQUEST_TOO_SMALL = -100;
    public static final int AICORE_INCOMPATIBLE = -101;
    public static final int INVALID_INPUT_IMAGE = -102;
    public static final int CACHE_PROCESSING_ERROR = -103;
    public static final int STRUCTURED_OUTPUT_REQUEST_ERROR = -104;
}
