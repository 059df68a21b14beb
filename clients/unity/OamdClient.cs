// OamdClient.cs — a small async client of the oamd bridge protocol (JSON-RPC 2.0, one JSON object per
// line) over TcpClient, for Unity and any .NET. It connects to a running `oamd serve --tcp`, sends
// `initialize` with the daemon's token as `auth` first, correlates responses, answers the daemon's
// `tool/call` requests with ToolHandler, and raises events for notifications. No dependencies: JSON
// values are plain Dictionary<string, object> / List<object> / string / double / long / bool / null.
// Events and tool handlers run on the SynchronizationContext ConnectAsync was called on (Unity's main
// thread when called from a MonoBehaviour), else on the reader thread.

using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Oamd
{
    /// <summary>An error response: <c>Code</c>, <c>Message</c>, <c>Name</c> (data.code), <c>ErrorData</c>.</summary>
    public sealed class OamdException : Exception
    {
        public readonly long Code;
        public readonly string Name;
        public readonly Dictionary<string, object> ErrorData;

        public OamdException(long code, string message, Dictionary<string, object> data)
            : base(message)
        {
            Code = code;
            ErrorData = data ?? new Dictionary<string, object>();
            object name;
            Name = ErrorData.TryGetValue("code", out name) ? name as string : null;
        }
    }

    public sealed class OamdClient : IDisposable
    {
        /// <summary>Answers one tool call: the tool's output (a string or any JSON value).</summary>
        public delegate Task<object> ToolHandler(string name, object arguments, Dictionary<string, object> callParams);

        /// <summary>Every notification: method and params.</summary>
        public event Action<string, Dictionary<string, object>> NotificationReceived;
        /// <summary>A <c>session/event</c>: session, request id, event.</summary>
        public event Action<string, object, Dictionary<string, object>> SessionEvent;
        /// <summary>The connection closed (the daemon stopped, or Dispose).</summary>
        public event Action Disconnected;

        /// <summary>Answers <c>tool/call</c>; when null, calls are answered with <c>isError</c>.</summary>
        public ToolHandler OnToolCall;

        /// <summary>The <c>initialize</c> result (server, capabilities, model).</summary>
        public Dictionary<string, object> ServerInfo { get; private set; }

        readonly TcpClient _tcp;
        readonly NetworkStream _stream;
        readonly SemaphoreSlim _writeLock = new SemaphoreSlim(1, 1);
        readonly ConcurrentDictionary<long, TaskCompletionSource<Dictionary<string, object>>> _pending =
            new ConcurrentDictionary<long, TaskCompletionSource<Dictionary<string, object>>>();
        readonly SynchronizationContext _context;
        long _nextId;
        int _closed;

        OamdClient(TcpClient tcp)
        {
            _tcp = tcp;
            _tcp.NoDelay = true;
            _stream = tcp.GetStream();
            _context = SynchronizationContext.Current;
        }

        /// <summary>Connects and authenticates; throws OamdException if the daemon refuses the token.</summary>
        public static async Task<OamdClient> ConnectAsync(string host, int port, string token, string clientName = "unity")
        {
            var tcp = new TcpClient();
            await tcp.ConnectAsync(host, port).ConfigureAwait(false);
            var client = new OamdClient(tcp);
            var reader = new Thread(client.ReadLoop) { IsBackground = true, Name = "oamd-reader" };
            reader.Start();
            try
            {
                var init = new Dictionary<string, object> {
                    { "protocolVersion", "1.0" },
                    { "client", new Dictionary<string, object> { { "name", clientName } } },
                    { "auth", token },
                };
                client.ServerInfo = (Dictionary<string, object>)await client.RequestAsync("initialize", init).ConfigureAwait(false);
            }
            catch
            {
                client.Dispose();
                throw;
            }
            return client;
        }

        /// <summary>Reads the token file named by the daemon's ready line (<c>tokenFile</c>).</summary>
        public static string ReadToken(string path)
        {
            return File.ReadAllText(path).Trim();
        }

        /// <summary>Sends a request and returns its result; throws OamdException for an error response.</summary>
        public async Task<object> RequestAsync(string method, Dictionary<string, object> parameters = null)
        {
            long id = Interlocked.Increment(ref _nextId);
            var waiter = new TaskCompletionSource<Dictionary<string, object>>(TaskCreationOptions.RunContinuationsAsynchronously);
            _pending[id] = waiter;
            await SendAsync(new Dictionary<string, object> {
                { "jsonrpc", "2.0" }, { "id", id }, { "method", method },
                { "params", parameters ?? new Dictionary<string, object>() },
            }).ConfigureAwait(false);
            var reply = await waiter.Task.ConfigureAwait(false);
            object error;
            if (reply.TryGetValue("error", out error))
            {
                var e = (Dictionary<string, object>)error;
                object data;
                e.TryGetValue("data", out data);
                throw new OamdException(Convert.ToInt64(e["code"]), (string)e["message"], data as Dictionary<string, object>);
            }
            object result;
            reply.TryGetValue("result", out result);
            return result;
        }

        async Task SendAsync(Dictionary<string, object> message)
        {
            byte[] bytes = Encoding.UTF8.GetBytes(Json.Write(message) + "\n");
            await _writeLock.WaitAsync().ConfigureAwait(false);
            try { await _stream.WriteAsync(bytes, 0, bytes.Length).ConfigureAwait(false); }
            finally { _writeLock.Release(); }
        }

        void ReadLoop()
        {
            var line = new MemoryStream();
            var chunk = new byte[65536];
            try
            {
                int n;
                while ((n = _stream.Read(chunk, 0, chunk.Length)) > 0)
                {
                    for (int i = 0; i < n; i++)
                    {
                        if (chunk[i] != (byte)'\n') { line.WriteByte(chunk[i]); continue; }
                        string text = Encoding.UTF8.GetString(line.GetBuffer(), 0, (int)line.Length).Trim();
                        line.SetLength(0);
                        if (text.Length > 0) Handle(Json.Read(text) as Dictionary<string, object>);
                    }
                }
            }
            catch (IOException) { }
            catch (ObjectDisposedException) { }
            finally { Close(); }
        }

        void Handle(Dictionary<string, object> message)
        {
            if (message == null) return;
            object method, id, parameters;
            message.TryGetValue("params", out parameters);
            var p = parameters as Dictionary<string, object> ?? new Dictionary<string, object>();
            if (message.TryGetValue("method", out method))
            {
                if (message.TryGetValue("id", out id)) Forget(AnswerAsync(id, (string)method, p));
                else Raise(() => OnNotification((string)method, p));
                return;
            }
            TaskCompletionSource<Dictionary<string, object>> waiter;
            if (message.TryGetValue("id", out id) && id is long && _pending.TryRemove((long)id, out waiter))
                waiter.TrySetResult(message);
        }

        void OnNotification(string method, Dictionary<string, object> p)
        {
            var all = NotificationReceived;
            if (all != null) all(method, p);
            var session = SessionEvent;
            if (method == "session/event" && session != null)
            {
                object name, requestId, ev;
                p.TryGetValue("session", out name);
                p.TryGetValue("requestId", out requestId);
                p.TryGetValue("event", out ev);
                session(name as string, requestId, ev as Dictionary<string, object>);
            }
        }

        async Task AnswerAsync(object id, string method, Dictionary<string, object> p)
        {
            var result = new Dictionary<string, object>();
            object call;
            p.TryGetValue("call", out call);
            var c = call as Dictionary<string, object> ?? new Dictionary<string, object>();
            object name, arguments;
            c.TryGetValue("name", out name);
            c.TryGetValue("arguments", out arguments);
            var handler = OnToolCall;
            if (method != "tool/call" || handler == null)
            {
                result["output"] = "The game cannot answer '" + method + "' for tool '" + name + "'.";
                result["isError"] = true;
            }
            else
            {
                try { result["output"] = await RunOnContext(() => handler((string)name, arguments, p)).ConfigureAwait(false); }
                catch (Exception ex) { result["output"] = ex.Message; result["isError"] = true; }
            }
            try { await SendAsync(new Dictionary<string, object> { { "jsonrpc", "2.0" }, { "id", id }, { "result", result } }).ConfigureAwait(false); }
            catch (Exception) { /* the connection is gone; the daemon dropped the call already */ }
        }

        static void Forget(Task task) { }  // AnswerAsync runs on by itself and catches its own errors

        Task<object> RunOnContext(Func<Task<object>> work)
        {
            if (_context == null) return work();
            var done = new TaskCompletionSource<Task<object>>();
            _context.Post(_ => { try { done.SetResult(work()); } catch (Exception ex) { done.SetException(ex); } }, null);
            return done.Task.Unwrap();
        }

        void Raise(Action action)
        {
            if (_context == null) { action(); return; }
            _context.Post(_ => action(), null);
        }

        void Close()
        {
            if (Interlocked.Exchange(ref _closed, 1) != 0) return;
            try { _tcp.Close(); } catch (Exception) { }
            foreach (var waiter in _pending.Values)
                waiter.TrySetException(new IOException("The connection to oamd closed."));
            _pending.Clear();
            var handler = Disconnected;
            if (handler != null) Raise(handler);
        }

        public void Dispose() { Close(); }
    }

    /// <summary>Minimal JSON: objects are Dictionary&lt;string, object&gt;, arrays List&lt;object&gt;,
    /// integers long, other numbers double.</summary>
    public static class Json
    {
        public static string Write(object value)
        {
            var sb = new StringBuilder();
            WriteValue(sb, value);
            return sb.ToString();
        }

        static void WriteValue(StringBuilder sb, object v)
        {
            if (v == null) sb.Append("null");
            else if (v is string) WriteString(sb, (string)v);
            else if (v is bool) sb.Append((bool)v ? "true" : "false");
            else if (v is IDictionary<string, object>)
            {
                sb.Append('{');
                bool first = true;
                foreach (var kv in (IDictionary<string, object>)v)
                {
                    if (!first) sb.Append(',');
                    first = false;
                    WriteString(sb, kv.Key);
                    sb.Append(':');
                    WriteValue(sb, kv.Value);
                }
                sb.Append('}');
            }
            else if (v is System.Collections.IEnumerable)
            {
                sb.Append('[');
                bool first = true;
                foreach (var item in (System.Collections.IEnumerable)v)
                {
                    if (!first) sb.Append(',');
                    first = false;
                    WriteValue(sb, item);
                }
                sb.Append(']');
            }
            else if (v is double || v is float) sb.Append(Convert.ToDouble(v).ToString("R", CultureInfo.InvariantCulture));
            else sb.Append(Convert.ToString(v, CultureInfo.InvariantCulture));  // integers
        }

        static void WriteString(StringBuilder sb, string s)
        {
            sb.Append('"');
            foreach (char c in s)
            {
                if (c == '"') sb.Append("\\\"");
                else if (c == '\\') sb.Append("\\\\");
                else if (c < ' ') sb.Append("\\u").Append(((int)c).ToString("x4"));
                else sb.Append(c);
            }
            sb.Append('"');
        }

        public static object Read(string text)
        {
            int i = 0;
            object value = ReadValue(text, ref i);
            SkipSpace(text, ref i);
            if (i != text.Length) throw new FormatException("Trailing characters after JSON value.");
            return value;
        }

        static void SkipSpace(string s, ref int i)
        {
            while (i < s.Length && char.IsWhiteSpace(s[i])) i++;
        }

        static object ReadValue(string s, ref int i)
        {
            SkipSpace(s, ref i);
            if (i >= s.Length) throw new FormatException("Unexpected end of JSON.");
            char c = s[i];
            if (c == '{')
            {
                var obj = new Dictionary<string, object>();
                i++;
                SkipSpace(s, ref i);
                if (s[i] == '}') { i++; return obj; }
                while (true)
                {
                    SkipSpace(s, ref i);
                    string key = ReadString(s, ref i);
                    SkipSpace(s, ref i);
                    Expect(s, ref i, ':');
                    obj[key] = ReadValue(s, ref i);
                    SkipSpace(s, ref i);
                    if (s[i] == ',') { i++; continue; }
                    Expect(s, ref i, '}');
                    return obj;
                }
            }
            if (c == '[')
            {
                var list = new List<object>();
                i++;
                SkipSpace(s, ref i);
                if (s[i] == ']') { i++; return list; }
                while (true)
                {
                    list.Add(ReadValue(s, ref i));
                    SkipSpace(s, ref i);
                    if (s[i] == ',') { i++; continue; }
                    Expect(s, ref i, ']');
                    return list;
                }
            }
            if (c == '"') return ReadString(s, ref i);
            if (s.Substring(i).StartsWith("true")) { i += 4; return true; }
            if (s.Substring(i).StartsWith("false")) { i += 5; return false; }
            if (s.Substring(i).StartsWith("null")) { i += 4; return null; }
            int start = i;
            while (i < s.Length && "+-0123456789.eE".IndexOf(s[i]) >= 0) i++;
            string number = s.Substring(start, i - start);
            long integer;
            if (long.TryParse(number, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out integer)) return integer;
            return double.Parse(number, NumberStyles.Float, CultureInfo.InvariantCulture);
        }

        static void Expect(string s, ref int i, char c)
        {
            if (i >= s.Length || s[i] != c) throw new FormatException("Expected '" + c + "' at " + i + ".");
            i++;
        }

        static string ReadString(string s, ref int i)
        {
            Expect(s, ref i, '"');
            var sb = new StringBuilder();
            while (true)
            {
                char c = s[i++];
                if (c == '"') return sb.ToString();
                if (c != '\\') { sb.Append(c); continue; }
                char e = s[i++];
                switch (e)
                {
                    case 'n': sb.Append('\n'); break;
                    case 't': sb.Append('\t'); break;
                    case 'r': sb.Append('\r'); break;
                    case 'b': sb.Append('\b'); break;
                    case 'f': sb.Append('\f'); break;
                    case 'u': sb.Append((char)Convert.ToInt32(s.Substring(i, 4), 16)); i += 4; break;
                    default: sb.Append(e); break;  // \" \\ \/
                }
            }
        }
    }
}
