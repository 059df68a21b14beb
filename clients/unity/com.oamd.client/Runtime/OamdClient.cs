// OamdClient: one connection to oamd, over either transport (StartAsync spawns `oamd stdio`,
// ConnectTcpAsync joins `oamd serve --tcp`), with the same API on both. It owns request correlation,
// the daemon's `tool/call` requests (answered by registered ToolHandlers, cancelled by `tool/cancel`) and
// notifications as C# events. Ordering: one reader thread takes lines in arrival order and one writer
// thread sends them in call order, so the game's thread never blocks on a socket or a pipe. Every
// callback (events, tool handlers, token cancellations) runs on the SynchronizationContext current at
// connect (Unity's main thread) or, without one, on whichever thread calls Pump(). The typed calls
// (sessions, NPCs, decisions, worlds) live in Api/, one file per protocol namespace.

using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Oamd
{
    /// <summary>How a client is set up; every member is optional.</summary>
    public sealed class OamdClientOptions
    {
        /// <summary><c>initialize</c>'s <c>client.name</c>, shown in the daemon's log.</summary>
        public string ClientName = "unity";
        /// <summary>Where callbacks run; null: SynchronizationContext.Current at connect.</summary>
        public SynchronizationContext Context;
        /// <summary>Set to route callbacks to a queue you drain (Pump) even when a context exists.</summary>
        public MainThreadQueue Queue;
    }

    public enum ClientState { Open, Closed }

    public sealed partial class OamdClient : IDisposable
    {
        /// <summary>Answers one <c>tool/call</c>. The returned value (a string or any JSON value) is the
        /// tool's output; an exception becomes an output with <c>isError</c>. <paramref name="cancellation"/>
        /// is cancelled when the daemon sends <c>tool/cancel</c> (timeout, turn cancelled) or the client closes.</summary>
        public delegate Task<object> ToolHandler(ToolCall call, CancellationToken cancellation);

        /// <summary>Every notification (method, params), before its typed event.</summary>
        public event Action<string, Dictionary<string, object>> Notification;
        /// <summary>The connection ended; the argument says why. Raised once.</summary>
        public event Action<string> Disconnected;
        /// <summary>A callback of yours threw. Without a handler the exception is logged
        /// (Debug.LogException in Unity, stderr elsewhere).</summary>
        public event Action<Exception> CallbackFailed;

        /// <summary>The <c>initialize</c> result: server, capabilities, model availability.</summary>
        public ServerInfo Server { get; private set; }
        public ClientState State { get { return _closed == 0 ? ClientState.Open : ClientState.Closed; } }

        readonly LineTransport _transport;
        readonly Callbacks _callbacks;
        readonly MainThreadQueue _queue;
        readonly BlockingCollection<string> _outbox = new BlockingCollection<string>();
        readonly ConcurrentDictionary<long, TaskCompletionSource<Dictionary<string, object>>> _pending =
            new ConcurrentDictionary<long, TaskCompletionSource<Dictionary<string, object>>>();
        readonly ConcurrentDictionary<string, CancellationTokenSource> _toolCalls =
            new ConcurrentDictionary<string, CancellationTokenSource>();
        readonly ConcurrentDictionary<string, ToolHandler> _tools = new ConcurrentDictionary<string, ToolHandler>();
        readonly Thread _writer;
        long _nextId;
        int _closed;
        string _closeReason;

        OamdClient(LineTransport transport, OamdClientOptions options)
        {
            _transport = transport;
            _queue = options.Queue ?? new MainThreadQueue();
            var context = options.Queue != null ? null : options.Context;
            _callbacks = new Callbacks(context, _queue, ReportCallbackFailure);
            _writer = new Thread(WriteLoop) { IsBackground = true, Name = "oamd-writer" };
            _writer.Start();
            new Thread(ReadLoop) { IsBackground = true, Name = "oamd-reader" }.Start();
#if UNITY_5_3_OR_NEWER
            OamdLifetime.Track(this);  // closed when play mode ends, scripts reload or the player quits
#endif
        }

        /// <summary>Spawns the daemon (`oamd stdio`) and initializes. Raises FileNotFoundException when the
        /// executable is missing, OamdDisconnectedException when it exits at once (a bad flag: see its log).</summary>
        public static Task<OamdClient> StartAsync(OamdProcessOptions process, OamdClientOptions options = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            return ConnectAsync(StdioTransport.Start(process), null, options, cancellation);
        }

        static OamdClientOptions WithCallerContext(OamdClientOptions options)
        {
            // Taken before the first await: later this method may continue on a pool thread.
            options = options ?? new OamdClientOptions();
            return new OamdClientOptions {
                ClientName = options.ClientName,
                Context = options.Context ?? SynchronizationContext.Current,
                Queue = options.Queue,
            };
        }

        /// <summary>Connects to `oamd serve --tcp` and authenticates with <paramref name="token"/> (the
        /// contents of the ready line's tokenFile). A wrong token raises OamdException
        /// (Name <c>invalid_message</c>, Data["auth"] <c>invalid</c>); a connection the daemon closes
        /// before answering is made once more (HandshakeReconnects).</summary>
        public static async Task<OamdClient> ConnectTcpAsync(string host, int port, string token,
            OamdClientOptions options = null, CancellationToken cancellation = default(CancellationToken))
        {
            options = WithCallerContext(options);
            // A connection closed before initialize was answered was dropped while waiting to
            // authenticate (a flood of silent peers drops the oldest; PROTOCOL.md "The handshake"):
            // connect once more, as the Python client does.
            for (int attempt = 0; ; attempt++)
            {
                var transport = await TcpTransport.ConnectAsync(host, port).ConfigureAwait(false);
                try
                {
                    return await ConnectAsync(transport, token, options, cancellation).ConfigureAwait(false);
                }
                catch (OamdDisconnectedException) when (attempt < HandshakeReconnects && !cancellation.IsCancellationRequested)
                {
                }
            }
        }

        /// <summary>How many times ConnectTcpAsync connects again when the daemon closes the connection
        /// before answering initialize.</summary>
        public const int HandshakeReconnects = 1;

        /// <summary>Initializes over any transport; the client owns it from here on.</summary>
        public static async Task<OamdClient> ConnectAsync(LineTransport transport, string token,
            OamdClientOptions options = null, CancellationToken cancellation = default(CancellationToken))
        {
            options = WithCallerContext(options);
            var client = new OamdClient(transport, options);
            try
            {
                var init = new Dictionary<string, object> {
                    { "protocolVersion", "1.0" },
                    { "client", new Dictionary<string, object> { { "name", options.ClientName } } },
                }.Put("auth", token);
                var result = await client.RequestAsync("initialize", init, cancellation).ConfigureAwait(false);
                client.Server = new ServerInfo(result as Dictionary<string, object>);
            }
            catch
            {
                client.Dispose();
                throw;
            }
            return client;
        }

        /// <summary>Reads a token file (the ready line's <c>tokenFile</c>).</summary>
        public static string ReadToken(string path)
        {
            return System.IO.File.ReadAllText(path).Trim();
        }

        /// <summary>Sends a request and returns its result as parsed JSON. Raises OamdException for an
        /// error answer, OamdDisconnectedException when the connection ends first. Cancelling
        /// <paramref name="cancellation"/> stops the waiting only: to stop a turn, cancel its session or NPC.</summary>
        public async Task<object> RequestAsync(string method, IDictionary<string, object> parameters = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            long id = Interlocked.Increment(ref _nextId);
            var waiter = new TaskCompletionSource<Dictionary<string, object>>(TaskCreationOptions.RunContinuationsAsynchronously);
            _pending[id] = waiter;
            Send(new Dictionary<string, object> {
                { "jsonrpc", "2.0" }, { "id", id }, { "method", method },
                { "params", parameters ?? new Dictionary<string, object>() },
            });
            Dictionary<string, object> reply;
            using (cancellation.Register(() => {
                TaskCompletionSource<Dictionary<string, object>> abandoned;
                if (_pending.TryRemove(id, out abandoned)) abandoned.TrySetCanceled();
            }))
                reply = await waiter.Task.ConfigureAwait(false);
            // A turn's events are queued for the context before its reply is read; the reply is handed on
            // once they have run, so code awaiting it there (Unity's main thread) has seen the whole stream,
            // however the threads ran (a reply in before the call reached its await would overtake them).
            if (_callbacks.Waiting) await _callbacks.CatchUp().ConfigureAwait(false);
            object error;
            if (reply.TryGetValue("error", out error))
                throw OamdException.FromError(error as Dictionary<string, object>);
            return JsonFields.Get(reply, "result");
        }

        /// <summary>Sends a notification (no answer), e.g. a fire-and-forget <c>session/cancel</c>.</summary>
        public void Notify(string method, IDictionary<string, object> parameters = null)
        {
            Send(new Dictionary<string, object> {
                { "jsonrpc", "2.0" }, { "method", method },
                { "params", parameters ?? new Dictionary<string, object>() },
            });
        }

        /// <summary>Runs the callbacks waiting for this thread; needed only without a SynchronizationContext
        /// (or with OamdClientOptions.Queue, which you then pump instead). Returns how many ran.</summary>
        public int Pump()
        {
            return _queue.Pump();
        }

        /// <summary>Waits up to <paramref name="timeout"/> for a callback, then pumps.</summary>
        public int Pump(TimeSpan timeout)
        {
            return _queue.Pump(timeout);
        }

        void Send(Dictionary<string, object> message)
        {
            string line = Json.Write(message);
            try { _outbox.Add(line); }
            catch (InvalidOperationException) { throw new OamdDisconnectedException(_closeReason ?? "The client is closed."); }
        }

        void WriteLoop()
        {
            try
            {
                foreach (var line in _outbox.GetConsumingEnumerable()) _transport.WriteLine(line);
            }
            catch (Exception ex)
            {
                Close("Writing to oamd failed: " + ex.Message);
            }
        }

        void ReadLoop()
        {
            try
            {
                string line;
                while ((line = _transport.ReadLine()) != null)
                {
                    if (line.Trim().Length == 0) continue;
                    Dictionary<string, object> message;
                    try { message = Json.Read(line) as Dictionary<string, object>; }
                    catch (FormatException) { continue; }  // the daemon only writes JSON; a stray line is not ours to judge
                    if (message != null) Handle(message);
                }
            }
            catch (Exception ex)
            {
                // Never leave the thread without closing: waiting calls would otherwise wait forever.
                Close("Reading from oamd failed: " + ex.Message);
            }
            Close(_transport.CloseReason);
        }

        void Handle(Dictionary<string, object> message)
        {
            object method, id;
            var p = JsonFields.Object(message, "params");
            bool hasId = message.TryGetValue("id", out id);
            if (message.TryGetValue("method", out method))
            {
                if (hasId) AnswerRequest(id, method as string, p);
                else OnNotification(method as string, p);
                return;
            }
            TaskCompletionSource<Dictionary<string, object>> waiter;
            if (id is long && _pending.TryRemove((long)id, out waiter)) waiter.TrySetResult(message);
        }

        void ReportCallbackFailure(Exception ex)
        {
            var handler = CallbackFailed;
            if (handler != null)
            {
                try { handler(ex); return; }
                catch (Exception) { /* fall through to the log: nothing else is left to tell */ }
            }
#if UNITY_5_3_OR_NEWER
            UnityEngine.Debug.LogException(ex);
#else
            Console.Error.WriteLine("oamd client: a callback failed: " + ex);
#endif
        }

        void Close(string reason)
        {
            if (Interlocked.Exchange(ref _closed, 1) != 0) return;
            _closeReason = reason;
#if UNITY_5_3_OR_NEWER
            OamdLifetime.Forget(this);
#endif
            _outbox.CompleteAdding();
            foreach (var id in _pending.Keys)
            {
                TaskCompletionSource<Dictionary<string, object>> waiter;
                if (_pending.TryRemove(id, out waiter)) waiter.TrySetException(new OamdDisconnectedException(reason));
            }
            foreach (var key in _toolCalls.Keys) CancelToolCall(key);
            // Let queued lines (a last tool answer, `shutdown`) reach the daemon before the transport closes.
            if (Thread.CurrentThread != _writer) _writer.Join(TimeSpan.FromSeconds(1));
            _transport.Dispose();
            var handler = Disconnected;
            if (handler != null) _callbacks.Post(() => handler(reason));
        }

        /// <summary>Closes the connection; over stdio the daemon gets end of input and exits (killed if it
        /// has not after OamdProcessOptions.ExitTimeout). Waiting calls fail with OamdDisconnectedException.</summary>
        public void Dispose()
        {
            Close("The client closed the connection.");
        }
    }
}
