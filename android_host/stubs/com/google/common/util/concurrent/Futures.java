package com.google.common.util.concurrent;
public final class Futures {
    private Futures() {}
    public static <V> void addCallback(ListenableFuture<V> future, FutureCallback<? super V> callback, java.util.concurrent.Executor executor) { throw new UnsupportedOperationException("stub"); }
}
