import android.content.Context;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.mlkit.common.MlKit;
import com.google.mlkit.genai.common.DownloadCallback;
import com.google.mlkit.genai.common.StreamingCallback;
import com.google.mlkit.genai.prompt.CountTokensResponse;
import com.google.mlkit.genai.prompt.GenerateContentRequest;
import com.google.mlkit.genai.prompt.GenerateContentResponse;
import com.google.mlkit.genai.prompt.Generation;
import com.google.mlkit.genai.prompt.GenerativeModel;
import com.google.mlkit.genai.prompt.SystemInstruction;
import com.google.mlkit.genai.prompt.java.FakeMlKit;
import com.google.mlkit.genai.prompt.java.GenerativeModelFutures;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import org.oamd.host.DownloadListener;
import org.oamd.host.GenerationSink;
import org.oamd.host.MlKitBackend;

/**
 * Drives the real MlKitBackend against the stub ML Kit on a desktop JVM (one scenario per run,
 * since ML Kit's initialisation is per process): {@code fresh} (nothing initialised ML Kit),
 * {@code provider} (its content provider did), {@code system} (SystemInstruction refusals),
 * {@code download} (one end of the listener whichever of ML Kit's callback and future ends first).
 * Prints one line per check; any failure throws (exit status 1).
 */
public final class MlKitBackendCheck {
    static final Context CONTEXT = new Context() {};

    /** An already-finished future. */
    static final class Done<V> implements ListenableFuture<V> {
        final V value;
        final Throwable failure;
        Done(V value, Throwable failure) { this.value = value; this.failure = failure; }
        @Override public void addListener(Runnable r, Executor e) { e.execute(r); }
        @Override public boolean cancel(boolean b) { return false; }
        @Override public boolean isCancelled() { return false; }
        @Override public boolean isDone() { return true; }
        @Override public V get() throws ExecutionException {
            if (failure != null) throw new ExecutionException(failure);
            return value;
        }
        @Override public V get(long t, TimeUnit u) throws ExecutionException { return get(); }
    }

    /** Records each request; fails those with a system instruction while failWith is set. */
    static final class FakeModel extends GenerativeModelFutures {
        final List<String> requests = new ArrayList<>();
        volatile String failWith;
        @Override public ListenableFuture<Integer> checkStatus() { return new Done<>(3, null); }
        @Override public ListenableFuture<Void> download(DownloadCallback c) { return new Done<>(null, null); }
        @Override public ListenableFuture<GenerateContentResponse> generateContent(GenerateContentRequest r) {
            return generateContent(r, t -> {});
        }
        @Override public synchronized ListenableFuture<GenerateContentResponse> generateContent(
                GenerateContentRequest r, StreamingCallback cb) {
            requests.add(r.stubSystem + "|" + r.stubText);
            if (failWith != null && r.stubSystem != null) {
                return new Done<>(null, new IllegalArgumentException(failWith));
            }
            cb.onNewText("ok");
            return new Done<>(new GenerateContentResponse(), null);
        }
        @Override public ListenableFuture<CountTokensResponse> countTokens(GenerateContentRequest r) { return new Done<>(null, null); }
        @Override public ListenableFuture<Integer> getTokenLimit() { return new Done<>(4000, null); }
        @Override public GenerativeModel getGenerativeModel() { return () -> {}; }
    }

    static final class Sink implements GenerationSink {
        final List<String> events = new ArrayList<>();
        final CountDownLatch ended = new CountDownLatch(1);
        @Override public synchronized void onChunk(String text) { events.add("chunk:" + text); }
        @Override public synchronized void onDone(String usage, String reason) { events.add("done:" + reason); ended.countDown(); }
        @Override public synchronized void onError(int code, String message, long retry) { events.add("error:" + code + ":" + message); ended.countDown(); }
    }

    /** Every call a download listener got, and any that came after its end. */
    static final class Listener implements DownloadListener {
        final List<String> calls = new ArrayList<>();
        final List<String> afterEnd = new ArrayList<>();
        boolean ended;
        @Override public synchronized void onProgress(long done, long total) { record("progress:" + done + "/" + total, false); }
        @Override public synchronized void onCompleted() { record("completed", true); }
        @Override public synchronized void onError(int code, String message) { record("error:" + code + ":" + message, true); }
        private void record(String call, boolean terminal) {
            if (ended) afterEnd.add(call);
            calls.add(call);
            ended |= terminal;
        }
        synchronized String seen() { return String.join(",", calls); }
    }

    /** One download played step by step ("callback:completed", "future:failed", ...). */
    static String download(MlKitBackend backend, FakeMlKit fake, String... steps) throws InterruptedException {
        Listener listener = new Listener();
        backend.download(listener);
        for (String step : steps) {
            int before = fake.listenersRun();
            switch (step) {
                case "callback:progress": fake.started(300); fake.progress(100); break;
                case "callback:completed": fake.callbackCompletes(); break;
                case "callback:failed": fake.callbackFails(501, "disk full"); break;
                case "future:completed": fake.futureSucceeds(); break;
                case "future:failed": fake.futureFails(8, "binding died"); break;
                default: throw new IllegalArgumentException(step);
            }
            // the future reports on the backend's executor: wait for it, so the next step follows
            if (step.startsWith("future")) check(fake.awaitListeners(before + 1, 5000), "future listener ran");
        }
        check(listener.afterEnd.isEmpty(), "nothing after the end: " + listener.calls);
        return listener.seen();
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static String generate(MlKitBackend backend, String options) throws InterruptedException {
        Sink sink = new Sink();
        backend.generate("Hi", options, sink);
        check(sink.ended.await(5, TimeUnit.SECONDS), "no terminal call");
        synchronized (sink) {
            return String.join(",", sink.events);
        }
    }

    public static void main(String[] args) {
        try {
            scenario(args[0]);
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1); // the backends' callback executors are not daemon threads
        }
        System.exit(0);
    }

    static void scenario(String name) throws Exception {
        FakeModel fake = new FakeModel();
        GenerativeModelFutures.stub = fake;
        switch (name) {
            case "fresh":
                try {
                    Generation.INSTANCE.getClient();
                    throw new AssertionError("the stub should refuse a client before initialisation");
                } catch (IllegalStateException expected) {
                    System.out.println("uninitialised: " + expected.getMessage());
                }
                new MlKitBackend(CONTEXT);
                check(MlKit.stubContext == CONTEXT, "ML Kit initialised with the service's context");
                new MlKitBackend(CONTEXT);
                System.out.println("two backends in a fresh process");
                break;
            case "provider":
                MlKit.initialize(CONTEXT); // as the content provider does in the main process
                new MlKitBackend(CONTEXT);
                new MlKitBackend(CONTEXT);
                System.out.println("two backends after the provider");
                break;
            case "system":
                MlKit.initialize(CONTEXT);
                String options = "{\"systemInstruction\":\"Be Gorm.\",\"temperature\":0.5}";
                MlKitBackend accepted = new MlKitBackend(CONTEXT);
                check(generate(accepted, options).equals("chunk:ok,done:STOP"), "accepted");
                check(fake.requests.get(0).equals("Be Gorm.|Hi"), "sent as a SystemInstruction: " + fake.requests);

                SystemInstruction.stubRefused = true; // refused by the builder
                MlKitBackend atBuild = new MlKitBackend(CONTEXT);
                check(generate(atBuild, options).equals("chunk:ok,done:STOP"), "refused at build");
                check(fake.requests.get(1).equals("null|Be Gorm.\n\nHi"), "inline: " + fake.requests);
                SystemInstruction.stubRefused = false;

                fake.failWith = "This model does not support a system instruction";
                MlKitBackend atGenerate = new MlKitBackend(CONTEXT);
                check(generate(atGenerate, options).equals("chunk:ok,done:STOP"), "refused at generate");
                check(generate(atGenerate, options).equals("chunk:ok,done:STOP"), "later request");
                check(fake.requests.subList(2, 5).toString().equals(
                        "[Be Gorm.|Hi, null|Be Gorm.\n\nHi, null|Be Gorm.\n\nHi]"), "retried inline: " + fake.requests);

                fake.failWith = "quota exceeded";
                MlKitBackend other = new MlKitBackend(CONTEXT);
                String failed = generate(other, options);
                check(failed.startsWith("error:0:") && failed.contains("quota exceeded"), "other failures stand: " + failed);
                check(fake.requests.size() == 6, "no retry for other failures: " + fake.requests);
                System.out.println("system instruction fallback");
                break;
            case "download":
                MlKit.initialize(CONTEXT);
                FakeMlKit scripted = FakeMlKit.install();
                MlKitBackend backend = new MlKitBackend(CONTEXT);
                String progress = "progress:0/300,progress:100/300,";
                String[][] orders = {
                    {progress + "completed", "callback:progress", "callback:completed", "future:completed"},
                    {progress + "completed", "callback:progress", "future:completed", "callback:completed"},
                    {"error:8:binding died", "future:failed"},
                    {progress + "error:501:disk full", "callback:progress", "callback:failed", "future:failed"},
                    {"error:8:binding died", "future:failed", "callback:failed"},
                    {"completed", "callback:completed", "future:failed"},
                    {progress + "completed", "callback:progress", "future:completed", "callback:progress", "callback:completed"},
                };
                for (String[] order : orders) {
                    String seen = download(backend, scripted, java.util.Arrays.copyOfRange(order, 1, order.length));
                    check(seen.equals(order[0]), String.join(" then ", order) + ": " + seen);
                }
                for (int i = 0; i < 2000; i++) { // both ends at once, from two threads
                    boolean callbackFails = i % 4 >= 2, futureFails = i % 2 == 1;
                    Listener listener = new Listener();
                    backend.download(listener);
                    int before = scripted.listenersRun();
                    scripted.race(callbackFails, futureFails, 501);
                    check(scripted.awaitListeners(before + 1, 5000), "future listener ran");
                    synchronized (listener) {
                        check(listener.calls.size() == 1 && listener.afterEnd.isEmpty(), "race " + i + ": " + listener.calls);
                    }
                }
                System.out.println("one end of every download");
                break;
            default:
                throw new IllegalArgumentException(name);
        }
    }
}
