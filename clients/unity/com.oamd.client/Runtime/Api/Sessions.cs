// session/*: free-form conversations with a model, client tools and streamed events. Method names and
// params are the protocol's (protocol/bridge.json); `extra` carries members this API does not name.

using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Oamd
{
    /// <summary>The <c>session/respond</c> result.</summary>
    public sealed class RespondResult
    {
        public readonly string Session;
        public readonly string Text;
        /// <summary>The parsed JSON of a schema turn, else null.</summary>
        public readonly object Structured;
        public readonly List<ToolCallRecord> ToolCalls;
        public readonly Usage Usage;
        public readonly List<string> Warnings;
        public readonly Dictionary<string, object> Raw;

        internal RespondResult(Dictionary<string, object> raw)
        {
            Raw = raw ?? new Dictionary<string, object>();
            Session = JsonFields.String(Raw, "session");
            Text = JsonFields.String(Raw, "text");
            Structured = JsonFields.Get(Raw, "structured");
            ToolCalls = ToolCallRecord.ListOf(Raw);
            Usage = new Usage(JsonFields.Object(Raw, "usage"));
            Warnings = JsonFields.Strings(Raw, "warnings");
        }
    }

    /// <summary>A <c>session/event</c>; <c>Type</c> is text, partial, toolCallStarted, toolCallCompleted or modelStep.</summary>
    public sealed class SessionEventArgs
    {
        public readonly string Session;
        public readonly object RequestId;
        public readonly string Type;
        /// <summary>For <c>text</c>: the new characters, and the whole text so far.</summary>
        public readonly string Delta;
        public readonly string Text;
        public readonly Dictionary<string, object> Event;

        internal SessionEventArgs(Dictionary<string, object> p)
        {
            Session = JsonFields.String(p, "session");
            RequestId = JsonFields.Get(p, "requestId");
            Event = JsonFields.Object(p, "event");
            Type = JsonFields.String(Event, "type");
            Delta = JsonFields.String(Event, "delta");
            Text = JsonFields.String(Event, "text");
        }
    }

    public sealed partial class OamdClient
    {
        /// <summary><c>session/create</c>. <paramref name="model"/>: "system" (default), "scripted", a
        /// ScriptedModel or a spec dictionary; <paramref name="options"/>: SessionOptions as JSON.</summary>
        public async Task<Created> CreateSessionAsync(string session = null, string instructions = null,
            IEnumerable<ToolDefinition> tools = null, object model = null, IDictionary<string, object> options = null,
            IDictionary<string, object> extra = null, CancellationToken cancellation = default(CancellationToken))
        {
            var p = new Dictionary<string, object>()
                .Put("session", session).Put("instructions", instructions).Put("tools", tools)
                .Put("model", model).Put("options", options).Merge(extra);
            return new Created(await Call("session/create", p, cancellation).ConfigureAwait(false), "session");
        }

        /// <summary><c>session/respond</c>: one turn. With <paramref name="stream"/>, SessionEvent reports
        /// text as it grows; client tools are called through their registered handlers either way.</summary>
        public async Task<RespondResult> RespondAsync(string session, string prompt, bool stream = false,
            IDictionary<string, object> schema = null, IDictionary<string, object> extra = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = new Dictionary<string, object> { { "session", session }, { "prompt", prompt } }
                .Put("stream", stream ? (object)true : null).Put("schema", schema).Merge(extra);
            return new RespondResult(await Call("session/respond", p, cancellation).ConfigureAwait(false));
        }

        /// <summary><c>session/cancel</c>: cancels the running and queued turns; returns how many.</summary>
        public async Task<long> CancelSessionAsync(string session, CancellationToken cancellation = default(CancellationToken))
        {
            var result = await Call("session/cancel", Id("session", session), cancellation).ConfigureAwait(false);
            return JsonFields.Long(result, "cancelled");
        }

        /// <summary><c>session/reset</c>: forgets the conversation, keeps instructions and tools.</summary>
        public Task ResetSessionAsync(string session, CancellationToken cancellation = default(CancellationToken))
        {
            return Call("session/reset", Id("session", session), cancellation);
        }

        /// <summary><c>session/delete</c>.</summary>
        public Task DeleteSessionAsync(string session, CancellationToken cancellation = default(CancellationToken))
        {
            return Call("session/delete", Id("session", session), cancellation);
        }

        /// <summary><c>session/list</c>: the SessionSummary objects.</summary>
        public async Task<List<object>> ListSessionsAsync(CancellationToken cancellation = default(CancellationToken))
        {
            return JsonFields.List(await Call("session/list", null, cancellation).ConfigureAwait(false), "sessions");
        }

        /// <summary><c>session/transcript</c>: the transcript JSON, which <c>history</c> of session/create takes back.</summary>
        public async Task<Dictionary<string, object>> TranscriptAsync(string session,
            CancellationToken cancellation = default(CancellationToken))
        {
            return JsonFields.Object(await Call("session/transcript", Id("session", session), cancellation).ConfigureAwait(false), "transcript");
        }

        /// <summary><c>session/setInstructions</c>; null clears them.</summary>
        public Task SetInstructionsAsync(string session, string instructions,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = Id("session", session);
            p["instructions"] = instructions;
            return Call("session/setInstructions", p, cancellation);
        }

        /// <summary><c>session/setContextNote</c>; null clears it.</summary>
        public Task SetContextNoteAsync(string session, string note, CancellationToken cancellation = default(CancellationToken))
        {
            var p = Id("session", session);
            p["note"] = note;
            return Call("session/setContextNote", p, cancellation);
        }

        /// <summary><c>session/setTools</c>: replaces the session's tools.</summary>
        public Task SetToolsAsync(string session, IEnumerable<ToolDefinition> tools,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = Id("session", session);
            p["tools"] = tools;
            return Call("session/setTools", p, cancellation);
        }

        /// <summary><c>session/compact</c>: summarises older turns; returns the summary (or null).</summary>
        public async Task<string> CompactSessionAsync(string session, long? keepRecentTurns = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = Id("session", session).Put("keepRecentTurns", keepRecentTurns);
            return JsonFields.String(await Call("session/compact", p, cancellation).ConfigureAwait(false), "summary");
        }

        async Task<Dictionary<string, object>> Call(string method, IDictionary<string, object> p, CancellationToken cancellation)
        {
            return await RequestAsync(method, p, cancellation).ConfigureAwait(false) as Dictionary<string, object>
                ?? new Dictionary<string, object>();
        }

        static Dictionary<string, object> Id(string key, string id)
        {
            return new Dictionary<string, object> { { key, id } };
        }
    }
}
