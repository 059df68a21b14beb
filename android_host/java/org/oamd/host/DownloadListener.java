package org.oamd.host;

/** Progress of a model download; exactly one of onCompleted / onError ends it. */
public interface DownloadListener {
    /** {@code totalBytes} is -1 when unknown. */
    void onProgress(long bytesDownloaded, long totalBytes);

    void onCompleted();

    void onError(int code, String message);
}
