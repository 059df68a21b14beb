package com.google.common.util.concurrent;
public interface ListenableFuture<V> extends java.util.concurrent.Future<V> {
    void addListener(Runnable listener, java.util.concurrent.Executor executor);
}
