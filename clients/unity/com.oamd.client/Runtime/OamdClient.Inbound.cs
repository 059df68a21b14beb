// What the daemon sends on its own: `tool/call` requests, answered by the ToolHandler registered under the
// tool's name, and notifications, raised as typed events. Handlers and events run on the callback thread
// (see OamdClient); a `tool/cancel` cancels the token of the call it names, on that thread too, so a
// handler never sees its token cancelled in the middle of a frame.

using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Oamd
{
    public sealed partial class OamdClient
    {
        /// <summary>A <c>session/event</c> (streamed text, tool calls, model steps).</summary>
        public event Action<SessionEventArgs> SessionEvent;
        /// <summary>An <c>npc/event</c> (line deltas, emotion, tool calls).</summary>
        public event Action<NpcEventArgs> NpcEvent;
        /// <summary>A <c>world/changed</c> of a subscription.</summary>
        public event Action<WorldChangedArgs> WorldChanged;
        /// <summary>A <c>tool/cancel</c>: the daemon no longer needs that call's output.</summary>
        public event Action<ToolCancelArgs> ToolCancelled;

        /// <summary>Answers the daemon's <c>tool/call</c>s for tool <paramref name="name"/> with
        /// <paramref name="handler"/> (replacing an earlier one). Calls to a tool without a handler are
        /// answered with an error output the model sees.</summary>
        public void RegisterTool(string name, ToolHandler handler)
        {
            if (handler == null) throw new ArgumentNullException("handler");
            _tools[name] = handler;
        }

        /// <summary>Registers <paramref name="handler"/> for <paramref name="tool"/> and returns the
        /// definition, to pass on to CreateSessionAsync or CreateNpcAsync.</summary>
        public ToolDefinition RegisterTool(ToolDefinition tool, ToolHandler handler)
        {
            RegisterTool(tool.Name, handler);
            return tool;
        }

        /// <summary>Registers a handler that answers at once, without awaiting anything.</summary>
        public ToolDefinition RegisterTool(ToolDefinition tool, Func<ToolCall, object> handler)
        {
            return RegisterTool(tool, (call, cancellation) => Task.FromResult(handler(call)));
        }

        public void UnregisterTool(string name)
        {
            ToolHandler removed;
            _tools.TryRemove(name, out removed);
        }

        static string IdKey(object id)
        {
            return Json.Write(id);  // ids are strings or numbers; their JSON text tells 7 from "7"
        }

        void AnswerRequest(object id, string method, Dictionary<string, object> p)
        {
            if (method != "tool/call")
            {
                SendQuietly(new Dictionary<string, object> {
                    { "jsonrpc", "2.0" }, { "id", id },
                    { "error", new Dictionary<string, object> {
                        { "code", -32601 }, { "message", "The game does not serve '" + method + "'." } } },
                });
                return;
            }
            var call = new ToolCall(p);
            var source = new CancellationTokenSource();
            string key = IdKey(id);
            _toolCalls[key] = source;
            ToolHandler handler;
            _tools.TryGetValue(call.Name ?? "", out handler);
            Task<object> work = handler == null
                ? Task.FromException<object>(new InvalidOperationException("The game has no handler for tool '" + call.Name + "'."))
                : _callbacks.Run(() => handler(call, source.Token));
            work.ContinueWith(done => FinishToolCall(id, key, source, done), TaskScheduler.Default);
        }

        void FinishToolCall(object id, string key, CancellationTokenSource source, Task<object> done)
        {
            CancellationTokenSource removed;
            _toolCalls.TryRemove(key, out removed);
            // After tool/cancel the daemon ignores any answer, so none is sent.
            if (source.IsCancellationRequested) return;
            var result = new Dictionary<string, object>();
            if (done.IsFaulted)
            {
                var ex = done.Exception.GetBaseException();
                result["output"] = ex.Message;
                result["isError"] = true;
            }
            else if (done.IsCanceled)
            {
                result["output"] = "The game cancelled the tool call.";
                result["isError"] = true;
            }
            else result["output"] = done.Result;
            SendQuietly(new Dictionary<string, object> { { "jsonrpc", "2.0" }, { "id", id }, { "result", result } });
        }

        void SendQuietly(Dictionary<string, object> message)
        {
            try { Send(message); }
            catch (OamdDisconnectedException) { /* the daemon dropped the call with the connection */ }
        }

        void CancelToolCall(string key)
        {
            CancellationTokenSource source;
            if (!_toolCalls.TryGetValue(key, out source)) return;
            _callbacks.Post(() =>
            {
                try { source.Cancel(); }
                catch (ObjectDisposedException) { /* finished meanwhile */ }
            });
        }

        void OnNotification(string method, Dictionary<string, object> p)
        {
            if (method == "tool/cancel") CancelToolCall(IdKey(JsonFields.Get(p, "id")));
            _callbacks.Post(() =>
            {
                var all = Notification;
                if (all != null) all(method, p);
                switch (method)
                {
                    case "session/event":
                        var session = SessionEvent;
                        if (session != null) session(new SessionEventArgs(p));
                        break;
                    case "npc/event":
                        var npc = NpcEvent;
                        if (npc != null) npc(new NpcEventArgs(p));
                        break;
                    case "world/changed":
                        var world = WorldChanged;
                        if (world != null) world(new WorldChangedArgs(p));
                        break;
                    case "tool/cancel":
                        var cancelled = ToolCancelled;
                        if (cancelled != null) cancelled(new ToolCancelArgs(p));
                        break;
                }
            });
        }
    }
}
