package com.google.mlkit.genai.prompt.java;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.mlkit.genai.common.DownloadCallback;
import com.google.mlkit.genai.common.StreamingCallback;
import com.google.mlkit.genai.prompt.CountTokensResponse;
import com.google.mlkit.genai.prompt.GenerateContentRequest;
import com.google.mlkit.genai.prompt.GenerateContentResponse;
import com.google.mlkit.genai.prompt.GenerativeModel;
public abstract class GenerativeModelFutures {
    public static GenerativeModelFutures from(GenerativeModel model) { throw new UnsupportedOperationException("stub"); }
    public abstract ListenableFuture<Integer> checkStatus();
    public abstract ListenableFuture<Void> download(DownloadCallback callback);
    public abstract ListenableFuture<GenerateContentResponse> generateContent(GenerateContentRequest request);
    public abstract ListenableFuture<GenerateContentResponse> generateContent(GenerateContentRequest request, StreamingCallback callback);
    public abstract ListenableFuture<CountTokensResponse> countTokens(GenerateContentRequest request);
    public abstract ListenableFuture<Integer> getTokenLimit();
    public abstract GenerativeModel getGenerativeModel();
}
