package com.google.mlkit.genai.prompt.java;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.mlkit.genai.common.DownloadCallback;
import com.google.mlkit.genai.common.StreamingCallback;
import com.google.mlkit.genai.prompt.CountTokensResponse;
import com.google.mlkit.genai.prompt.GenerateContentRequest;
import com.google.mlkit.genai.prompt.GenerateContentResponse;
import com.google.mlkit.genai.prompt.GenerativeModel;
public abstract class GenerativeModelFutures {
    /** Stub only: what from() returns (a test's fake); null: unsupported. */
    public static volatile GenerativeModelFutures stub;
    public static GenerativeModelFutures from(GenerativeModel model) {
        if (stub == null) throw new UnsupportedOperationException("stub");
        return stub;
    }
    public abstract ListenableFuture<Integer> checkStatus();
    public abstract ListenableFuture<Void> download(DownloadCallback callback);
    public abstract ListenableFuture<GenerateContentResponse> generateContent(GenerateContentRequest request);
    public abstract ListenableFuture<GenerateContentResponse> generateContent(GenerateContentRequest request, StreamingCallback callback);
    public abstract ListenableFuture<CountTokensResponse> countTokens(GenerateContentRequest request);
    public abstract ListenableFuture<Integer> getTokenLimit();
    public abstract GenerativeModel getGenerativeModel();
}
