package com.google.common.util.concurrent;
public final class Futures {
    private Futures() {}
    /** As Guava: the callback runs on executor once the future is done. */
    public static <V> void addCallback(ListenableFuture<V> future, FutureCallback<? super V> callback, java.util.concurrent.Executor executor) {
        future.addListener(() -> {
            V value;
            try {
                value = future.get();
            } catch (java.util.concurrent.ExecutionException e) {
                callback.onFailure(e.getCause());
                return;
            } catch (RuntimeException | Error | InterruptedException e) {
                callback.onFailure(e);
                return;
            }
            callback.onSuccess(value);
        }, executor);
    }
}
