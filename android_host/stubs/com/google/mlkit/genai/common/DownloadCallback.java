package com.google.mlkit.genai.common;
public interface DownloadCallback {
    void onDownloadStarted(long bytesToDownload);
    void onDownloadFailed(GenAiException e);
    void onDownloadProgress(long totalBytesDownloaded);
    void onDownloadCompleted();
}
